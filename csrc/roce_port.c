// SPDX-License-Identifier: GPL-2.0
/*
 * C forwarders for the RoCEv2 UDP sockets (one per address family and
 * namespace) (declared in rroce_helpers.h).
 */

#include <net/udp_tunnel.h>
#include "rroce_helpers.h"

/* The RoCEv2 UDP socket of one address family in one namespace. */
struct socket *rroce_udp_tunnel_open(struct net *net, bool ipv6,
				     int (*rcv)(struct sock *sk, struct sk_buff *skb), void *user_data)
{
	struct udp_tunnel_sock_cfg tcfg = {};
	struct udp_port_cfg cfg = {};
	struct socket *sock;
	int err;

	cfg.family = ipv6 ? AF_INET6 : AF_INET;
	cfg.ipv6_v6only = ipv6;
	cfg.local_udp_port = htons(ROCE_V2_UDP_DPORT);
	err = udp_sock_create(net, &cfg, &sock);
	if (err < 0)
		return ERR_PTR(err);
	tcfg.encap_type = 1;
	tcfg.encap_rcv = rcv;
	tcfg.sk_user_data = user_data;
	setup_udp_tunnel_sock(net, sock->sk, &tcfg);
	return sock;
}

void rroce_udp_tunnel_close(struct socket *sock)
{
	udp_tunnel_sock_release(sock->sk);
}

void *rroce_sk_user_data(struct sock *sk)
{
	return rcu_dereference_sk_user_data(sk);
}
