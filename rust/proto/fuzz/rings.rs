// SPDX-License-Identifier: GPL-2.0
//! Fuzz targets: Ring geometry and completion entries (`queue`, `cqe`).

use super::*;

fn ring_param() -> impl Strategy<Value = u32> {
    prop_oneof![
        0u32..=70_000,
        any::<u32>(),
        (0u32..32).prop_map(|s| 1 << s),
        (1u32..=32).prop_map(|s| ((1u64 << s) - 1) as u32),
        MAX_ELEM_SIZE - 1..=MAX_ELEM_SIZE + 1,
    ]
}

/// Who sets an index: the kernel, or user space with any value.
#[derive(Clone, Debug)]
enum RingStep {
    UserProducer(u32),
    UserConsumer(u32),
    /// The kernel takes what user space produced, at most this many.
    KernelConsumes(u8),
    /// The kernel adds entries (completions) while there is room.
    KernelProduces(u8),
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn geometry_any_parameters(capacity in ring_param(), elem in ring_param(),
                               min_slot in ring_param(), max_cap in ring_param(),
                               p in any::<u32>(), c in any::<u32>()) {
        let r = Geometry::new(capacity, elem, min_slot, max_cap);
        let want = if capacity == 0 || capacity > max_cap || capacity >= 1 << 30 {
            Err(GeometryError::BadCapacity)
        } else if elem.max(min_slot) > MAX_ELEM_SIZE {
            Err(GeometryError::BadElemSize)
        } else {
            Ok(())
        };
        prop_assert_eq!(r.map(|_| ()), want);
        let Ok(g) = r else { return Ok(()) };
        prop_assert!(g.num_slots().is_power_of_two());
        prop_assert!(g.capacity() >= capacity && g.capacity() <= 2 * capacity);
        let slot = g.elem_size();
        prop_assert!(slot.is_power_of_two() && slot >= elem.max(min_slot) as usize && slot <= MAX_ELEM_SIZE as usize);
        prop_assert_eq!(g.buf_bytes() as u128, HDR_BYTES as u128 + u128::from(g.num_slots()) * slot as u128);
        let count = g.count(p, c);
        prop_assert!(count <= g.capacity());
        let off = g.slot_offset(p);
        prop_assert!(off >= HDR_BYTES && off + slot <= g.buf_bytes() && (off - HDR_BYTES).is_multiple_of(slot));
        prop_assert!(g.next(p) <= g.index_mask());
        prop_assert_eq!(g.is_full(p, c), count == g.capacity());
        if count < g.capacity() {
            prop_assert_eq!(g.count(g.next(p), c), count + 1);
        }
    }

    /// A ring whose user side writes any index: the kernel's reads and
    /// writes stay in the buffer and never exceed the capacity.
    #[test]
    fn ring_with_hostile_indices(capacity in 1u32..=64, elem in 1u32..=256, steps in vec(prop_oneof![
        any::<u32>().prop_map(RingStep::UserProducer),
        any::<u32>().prop_map(RingStep::UserConsumer),
        any::<u8>().prop_map(RingStep::KernelConsumes),
        any::<u8>().prop_map(RingStep::KernelProduces),
    ], 0..32)) {
        let g = Geometry::new(capacity, elem, 64, 1 << 15).unwrap();
        let mut buf = std::vec![0u8; g.buf_bytes()];
        let (mut user_prod, mut user_cons) = (0u32, 0u32);
        let (mut kernel_cons, mut kernel_prod) = (0u32, 0u32);
        for step in steps {
            match step {
                RingStep::UserProducer(v) => user_prod = v,
                RingStep::UserConsumer(v) => user_cons = v,
                RingStep::KernelConsumes(n) => {
                    let avail = g.count(user_prod, kernel_cons);
                    prop_assert!(avail <= g.capacity());
                    for _ in 0..u32::from(n).min(avail) {
                        let at = g.slot_offset(kernel_cons);
                        prop_assert!(buf.get(at..at + g.elem_size()).is_some());
                        kernel_cons = g.next(kernel_cons);
                    }
                }
                RingStep::KernelProduces(n) => {
                    for _ in 0..n {
                        if g.is_full(kernel_prod, user_cons) {
                            break;
                        }
                        let at = g.slot_offset(kernel_prod);
                        let slot = buf.get_mut(at..at + g.elem_size());
                        prop_assert!(slot.is_some());
                        slot.unwrap().fill(0xee);
                        kernel_prod = g.next(kernel_prod);
                    }
                    prop_assert!(g.count(kernel_prod, user_cons) <= g.capacity());
                }
            }
            prop_assert!(kernel_cons <= g.index_mask() && kernel_prod <= g.index_mask());
        }
        prop_assert!(buf[..HDR_BYTES].iter().all(|&x| x == 0), "the kernel wrote into the ring header");
    }

    #[test]
    fn cqe_image_any_bytes(b in vec(any::<u8>(), UVERBS_WC_BYTES)) {
        let b: [u8; UVERBS_WC_BYTES] = b.try_into().unwrap();
        let c = Cqe::from_uverbs_wc(&b);
        prop_assert_eq!(c.network_hdr_type, 0);
        let mut want = b;
        for reserved in [42, 43, 45, 47] {
            want[reserved] = 0;
        }
        // A status no completion has reads as a general error.
        let status = u32::from_ne_bytes([b[8], b[9], b[10], b[11]]);
        if WcStatus::from_u32(status).is_none() {
            want[8..12].copy_from_slice(&(WcStatus::GeneralErr as u32).to_ne_bytes());
        }
        prop_assert_eq!(c.to_uverbs_wc(), want);
    }
}
