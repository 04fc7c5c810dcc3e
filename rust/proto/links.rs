// SPDX-License-Identifier: GPL-2.0
//! Counted links in slots that stay put: a PD's links to the queues of
//! other PDs, one per other PD, counted per QP that makes it. A slot let go
//! stays empty (until a new link takes it), so that one who looks at the
//! slots one at a time, letting go of their lock in between, misses no link
//! that stays meanwhile.

/// A link to `to`, made by `count` QPs.
#[derive(Debug, PartialEq, Eq)]
pub struct Link<T> {
    pub to: T,
    pub count: usize,
}

/// Where a new link goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Place {
    /// The slot that links to it already: counted once more.
    Counted(usize),
    /// The first empty slot.
    Free(usize),
    /// A slot more, at the end.
    Append,
}

/// Where one more link to the target `is_to` accepts goes among `slots`.
pub fn place<T>(slots: &[Option<Link<T>>], is_to: impl Fn(&T) -> bool) -> Place {
    if let Some(at) = slots.iter().position(|s| s.as_ref().is_some_and(|l| is_to(&l.to))) {
        return Place::Counted(at);
    }
    match slots.iter().position(Option::is_none) {
        Some(at) => Place::Free(at),
        None => Place::Append,
    }
}

/// Counts one link out of the slot to the target `is_to` accepts; returns
/// the link once its last count went (its slot is empty then).
pub fn count_out<T>(slots: &mut [Option<Link<T>>], is_to: impl Fn(&T) -> bool) -> Option<Link<T>> {
    let slot = slots.iter_mut().find(|s| s.as_ref().is_some_and(|l| is_to(&l.to)))?;
    let link = slot.as_mut()?;
    link.count = link.count.saturating_sub(1);
    if link.count == 0 {
        slot.take()
    } else {
        None
    }
}

/// Whether no slot holds a link (the slots may all go).
pub fn all_free<T>(slots: &[Option<Link<T>>]) -> bool {
    slots.iter().all(Option::is_none)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(to: u32, count: usize) -> Option<Link<u32>> {
        Some(Link { to, count })
    }

    #[test]
    fn a_link_made_again_is_counted_on_its_slot() {
        let slots = [None, link(7, 1), link(9, 2)];
        assert_eq!(place(&slots, |&t| t == 9), Place::Counted(2));
    }

    #[test]
    fn a_new_link_takes_the_first_empty_slot_else_one_more() {
        assert_eq!(place(&[link(1, 1), None, None], |&t| t == 9), Place::Free(1));
        assert_eq!(place(&[link(1, 1), link(2, 1)], |&t| t == 9), Place::Append);
        assert_eq!(place::<u32>(&[], |&t| t == 9), Place::Append);
    }

    #[test]
    fn a_link_goes_with_its_last_count_and_its_slot_stays_empty() {
        let mut slots = [link(1, 1), link(7, 2), link(3, 1)];
        assert_eq!(count_out(&mut slots, |&t| t == 7), None);
        assert_eq!(slots[1], link(7, 1));
        assert_eq!(count_out(&mut slots, |&t| t == 7), Some(Link { to: 7, count: 0 }));
        // The others keep their places.
        assert_eq!(slots, [link(1, 1), None, link(3, 1)]);
        assert!(!all_free(&slots));
    }

    #[test]
    fn counting_out_a_link_not_there_changes_nothing() {
        let mut slots = [link(1, 1), None];
        assert_eq!(count_out(&mut slots, |&t| t == 5), None);
        assert_eq!(slots, [link(1, 1), None]);
    }

    #[test]
    fn slots_are_all_free_once_every_link_went() {
        let mut slots = [link(1, 1), link(2, 1)];
        count_out(&mut slots, |&t| t == 1);
        count_out(&mut slots, |&t| t == 2);
        assert!(all_free(&slots));
        assert!(all_free::<u32>(&[]));
    }
}
