//! The protobuf wire format, walked in place: one message's fields as (number, value,
//! offset), with the offset of a fault for its message. The reply checks
//! (`reply_grpc.rs`) and the engine's stream scan (`stream_scan.rs`) read gRPC replies
//! through it without decoding them.

/// Deepest group nesting the generic walk follows.
const MAX_GROUP_DEPTH: u32 = 64;

/// A wire-format fault: what, in which field, at which byte of the whole message.
pub(super) struct WireErr {
    pub(super) field: u64,
    pub(super) at: usize,
    pub(super) what: &'static str,
}

/// One field's value.
#[derive(Clone, Copy)]
pub(super) enum Val<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
    /// Start of a group (wire type 3); the walker skips it.
    Group,
}

/// Walks the fields of one message; `base` is its offset in the whole reply (for messages).
pub(super) struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Fields<'a> {
    pub(super) fn new(buf: &'a [u8], base: usize) -> Fields<'a> {
        Fields { buf, pos: 0, base }
    }

    /// Every byte has been read.
    pub(super) fn at_end(&self) -> bool {
        self.pos == self.buf.len()
    }

    fn fault(&self, field: u64, what: &'static str) -> WireErr {
        WireErr {
            field,
            at: self.base + self.pos,
            what,
        }
    }

    pub(super) fn varint(&mut self, field: u64) -> Result<u64, WireErr> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let Some(&byte) = self.buf.get(self.pos) else {
                return Err(self.fault(field, "truncated"));
            };
            self.pos += 1;
            if shift == 63 && byte > 1 {
                return Err(self.fault(field, "has a varint over 64 bits"));
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.fault(field, "has a varint longer than 10 bytes"))
    }

    pub(super) fn take(&mut self, field: u64, n: u64) -> Result<&'a [u8], WireErr> {
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| self.pos.checked_add(n))
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| self.fault(field, "truncated"))?;
        let bytes = &self.buf[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }

    /// The next field as (number, value, offset of the value in the reply: for a
    /// length-delimited field, of its first byte after the length).
    pub(super) fn next(&mut self) -> Result<Option<(u64, Val<'a>, usize)>, WireErr> {
        if self.pos == self.buf.len() {
            return Ok(None);
        }
        let key = self.varint(0)?;
        let field = key >> 3;
        if field == 0 || field > (1 << 29) - 1 {
            return Err(self.fault(field, "has an invalid field number"));
        }
        let mut at = self.base + self.pos;
        let val = match key & 7 {
            0 => Val::Varint(self.varint(field)?),
            1 => self.take(field, 8).map(|_| Val::Fixed)?,
            2 => {
                let len = self.varint(field)?;
                at = self.base + self.pos;
                Val::Bytes(self.take(field, len)?)
            }
            3 => Val::Group,
            5 => self.take(field, 4).map(|_| Val::Fixed)?,
            _ => return Err(self.fault(field, "has an invalid wire type")),
        };
        Ok(Some((field, val, at)))
    }

    /// After a group start of `field`: skips to its matching end.
    pub(super) fn skip_group(&mut self, field: u64, depth: u32) -> Result<(), WireErr> {
        if depth > MAX_GROUP_DEPTH {
            return Err(self.fault(field, "nests groups too deeply"));
        }
        loop {
            if self.pos == self.buf.len() {
                return Err(self.fault(field, "truncated"));
            }
            let key = self.varint(field)?;
            if key & 7 == 4 {
                return if key >> 3 == field {
                    Ok(())
                } else {
                    Err(self.fault(field, "has an unmatched group end"))
                };
            }
            self.pos -= varint_len(key);
            match self.next()? {
                Some((inner, Val::Group, _)) => self.skip_group(inner, depth + 1)?,
                Some(_) => {}
                None => return Err(self.fault(field, "truncated")),
            }
        }
    }
}

fn varint_len(v: u64) -> usize {
    (64 - v.max(1).leading_zeros() as usize).div_ceil(7)
}
