#!/usr/bin/env python3
"""A point-to-point link made of two tun devices: creates tun device NAME_A
in network namespace NS_A and NAME_B in NS_B, and copies every IP packet
one side sends to the other, as a VPN would. Runs until killed.

    tun_relay.py NS_A NAME_A NS_B NAME_B
"""
import fcntl
import os
import select
import struct
import sys

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000


def tun_in(ns, name):
    # The device is created in the namespace the opener lives in.
    with open(f'/run/netns/{ns}') as f:
        os.setns(f.fileno(), os.CLONE_NEWNET)
    fd = os.open('/dev/net/tun', os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack('16sH', name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


def main():
    ns_a, name_a, ns_b, name_b = sys.argv[1:5]
    a = tun_in(ns_a, name_a)
    b = tun_in(ns_b, name_b)
    other = {a: b, b: a}
    print('relay up', flush=True)
    while True:
        ready, _, _ = select.select([a, b], [], [])
        for fd in ready:
            pkt = os.read(fd, 65536)
            try:
                os.write(other[fd], pkt)
            except OSError:
                pass  # the other side is down: the packet is lost, as on a wire


if __name__ == '__main__':
    main()
