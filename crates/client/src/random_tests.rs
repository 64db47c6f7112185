use super::*;

#[test]
fn unit_covers_zero_up_to_below_one() {
    assert_eq!(unit(0), 0.0);
    assert_eq!(unit(u64::MAX), 1.0 - 2f64.powi(-53));
    assert_eq!(unit(1 << 63), 0.5);
    // The low 11 bits do not count.
    assert_eq!(unit(0x7ff), 0.0);
    assert_eq!(unit(1 << 11), 2f64.powi(-53));
}

#[test]
fn unit_open0_is_above_zero_up_to_one() {
    assert_eq!(unit_open0(0), 2f64.powi(-53));
    assert_eq!(unit_open0(u64::MAX), 1.0);
    assert!(unit_open0(0).ln().is_finite());
    for bits in [0u64, 12_345, 1 << 40, u64::MAX / 3, u64::MAX] {
        assert_eq!(unit_open0(bits), unit(bits) + 2f64.powi(-53));
    }
}
