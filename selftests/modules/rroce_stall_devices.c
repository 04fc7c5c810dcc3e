// SPDX-License-Identifier: GPL-2.0
/*
 * Test only: registers an RDMA client whose add callback sleeps, so that
 * loading this module keeps the core's device list locked for a while (it
 * is held across the callback). A namespace move of a device waits for
 * that lock after the device's reference count has dropped to zero and
 * before the device is enabled again: the window stays open for the stall.
 * Needs one registered RDMA device (the callback runs once per device).
 *
 *   insmod rroce_stall_devices.ko stall_ms=<ms>   (returns after the stall)
 */
#include <linux/delay.h>
#include <linux/module.h>
#include <rdma/ib_verbs.h>

static unsigned int stall_ms = 3000;
module_param(stall_ms, uint, 0444);
MODULE_PARM_DESC(stall_ms, "how long the first add callback sleeps");

static bool stalled;

static int stall_add(struct ib_device *dev)
{
	if (!stalled) {
		stalled = true;
		pr_info("rroce_stall_devices: holding the device list for %u ms\n", stall_ms);
		msleep(stall_ms);
	}
	return 0;
}

static void stall_remove(struct ib_device *dev, void *client_data)
{
}

static struct ib_client stall_client = {
	.name = "rroce_stall_devices",
	.add = stall_add,
	.remove = stall_remove,
};

static int __init stall_init(void)
{
	return ib_register_client(&stall_client);
}

static void __exit stall_exit(void)
{
	ib_unregister_client(&stall_client);
}

module_init(stall_init);
module_exit(stall_exit);
MODULE_DESCRIPTION("rroce test helper: keep the RDMA device list locked for a while");
MODULE_LICENSE("GPL");
