// SPDX-License-Identifier: GPL-2.0
//! The access rights `proto::access` defines are the kernel's `ib_access_flags`.

use crate::proto::access as proto;
use crate::sys;

const _: () = {
    assert!(proto::LOCAL_WRITE == sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE);
    assert!(proto::REMOTE_WRITE == sys::ib_access_flags_IB_ACCESS_REMOTE_WRITE);
    assert!(proto::REMOTE_READ == sys::ib_access_flags_IB_ACCESS_REMOTE_READ);
    assert!(proto::REMOTE_ATOMIC == sys::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC);
    assert!(proto::MW_BIND == sys::ib_access_flags_IB_ACCESS_MW_BIND);
    assert!(proto::ZERO_BASED == sys::ib_access_flags_IB_ZERO_BASED);
    assert!(proto::ON_DEMAND == sys::ib_access_flags_IB_ACCESS_ON_DEMAND);
    assert!(proto::FLUSH_GLOBAL == sys::ib_access_flags_IB_ACCESS_FLUSH_GLOBAL);
    assert!(proto::FLUSH_PERSISTENT == sys::ib_access_flags_IB_ACCESS_FLUSH_PERSISTENT);
    assert!(proto::OPTIONAL == sys::ib_access_flags_IB_ACCESS_OPTIONAL);
};
