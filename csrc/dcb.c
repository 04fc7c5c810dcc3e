// SPDX-License-Identifier: GPL-2.0
/*
 * C forwarders for a netdev's DCB state, gathered under RTNL (declared in
 * rroce_helpers.h).
 */

#include <linux/rtnetlink.h>
#include <net/dcbnl.h>
#include "rroce_helpers.h"

/* The caller holds RTNL, as dcbnl does around the driver's DCB ops. */
void rroce_dcb_read(struct net_device *ndev, struct rroce_dcb *out)
{
	const struct dcbnl_rtnl_ops *ops = NULL;
	int i, n = 0;

	ASSERT_RTNL();
	memset(out, 0, sizeof(*out));
	out->trust_count = -1;
	/* A device on its way out may have torn down what its ops use. */
	if (ndev->reg_state != NETREG_REGISTERED)
		return;
#ifdef CONFIG_DCB
	ops = ndev->dcbnl_ops;
	if (ops) {
		struct dcb_ieee_app_dscp_map map = {};
		struct ieee_pfc pfc = {};
		struct ieee_ets ets = {};

		out->has_dcbnl = 1;
		if (ops->ieee_getpfc && !ops->ieee_getpfc(ndev, &pfc)) {
			out->pfc_valid = 1;
			out->pfc_en = pfc.pfc_en;
		}
		if (ops->ieee_getets && !ops->ieee_getets(ndev, &ets)) {
			out->tc_valid = 1;
			memcpy(out->prio_tc, ets.prio_tc, sizeof(out->prio_tc));
		}
		dcb_ieee_getapp_dscp_prio_mask_map(ndev, &map);
		memcpy(out->dscp_prio_mask, map.map, sizeof(out->dscp_prio_mask));
		out->default_prio_mask = dcb_ieee_getapp_default_prio_mask(ndev);
		if (ops->dcbnl_getapptrust && !ops->dcbnl_getapptrust(ndev, out->trust, &n) &&
		    n >= 0 && n <= ARRAY_SIZE(out->trust))
			out->trust_count = n;
	}
#endif
	if (!out->tc_valid && netdev_get_num_tc(ndev)) {
		out->tc_valid = 1;
		for (i = 0; i < ARRAY_SIZE(out->prio_tc); i++)
			out->prio_tc[i] = netdev_get_prio_tc_map(ndev, i);
	}
}
