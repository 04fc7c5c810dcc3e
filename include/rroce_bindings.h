/* SPDX-License-Identifier: GPL-2.0 */
/* Headers whose declarations bindgen turns into rust/sys.rs. */
#include <linux/netdevice.h>
#include <linux/if_arp.h>
#include <linux/vmalloc.h>
#include <linux/mm.h>
#include <net/udp_tunnel.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/rdma_netlink.h>
#include "rroce_helpers.h"
