//! The language's arithmetic on canonical values: constant folding uses
//! it, and it is the reference the generated code is tested against.

use crate::ir::{BinOp, CmpOp};
use crate::types::Ty;

/// `x op y` in type `ty` (both canonical), canonical result.
pub fn binop(op: BinOp, ty: Ty, x: u64, y: u64) -> u64 {
    let s = ty.signed();
    let r = match op {
        BinOp::Add => x.wrapping_add(y),
        BinOp::Sub => x.wrapping_sub(y),
        BinOp::Mul => x.wrapping_mul(y),
        BinOp::Div => {
            if y == 0 {
                0
            } else if s {
                (x as i64).wrapping_div(y as i64) as u64
            } else {
                x / y
            }
        }
        BinOp::Mod => {
            if y == 0 {
                x
            } else if s {
                (x as i64).wrapping_rem(y as i64) as u64
            } else {
                x % y
            }
        }
        BinOp::And => x & y,
        BinOp::Or => x | y,
        BinOp::Xor => x ^ y,
        BinOp::Shl => x << (y & (ty.bits() as u64 - 1)),
        BinOp::Shr => {
            let n = y & (ty.bits() as u64 - 1);
            if s {
                ((x as i64) >> n) as u64
            } else {
                x >> n
            }
        }
    };
    ty.wrap(r)
}

/// `x op y` compared in type `ty`.
pub fn cmp(op: CmpOp, ty: Ty, x: u64, y: u64) -> bool {
    let (a, b) = (ty.value(x), ty.value(y));
    match op {
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn division_rules() {
        assert_eq!(binop(BinOp::Div, Ty::U32, 7, 0), 0);
        assert_eq!(binop(BinOp::Mod, Ty::U32, 7, 0), 7);
        let m7 = Ty::S32.wrap(-7i64 as u64);
        assert_eq!(
            binop(BinOp::Div, Ty::S32, m7, 2),
            Ty::S32.wrap(-3i64 as u64)
        );
        assert_eq!(
            binop(BinOp::Mod, Ty::S32, m7, 2),
            Ty::S32.wrap(-1i64 as u64)
        );
        assert_eq!(binop(BinOp::Add, Ty::U8, 255, 1), 0);
        assert_eq!(binop(BinOp::Shl, Ty::U8, 1, 9), 2);
        assert_eq!(
            binop(BinOp::Shr, Ty::S8, Ty::S8.wrap(0x80), 1),
            Ty::S8.wrap(0xc0)
        );
    }
}
