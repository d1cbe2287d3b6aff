//! The protobuf codec of every keelson gRPC service: prost's messages, but
//! encoded into and decoded from one contiguous byte slice.
//!
//! tonic's own prost codec reads through its `DecodeBuf` and writes through
//! its `EncodeBuf`, which advance a `BytesMut` per varint and per byte; the
//! candidates answer is hundreds of thousands of packed varints, and those
//! calls were a tenth of the whole request. tonic hands a decoder the whole
//! message in one buffer, so reading it as a plain slice changes nothing but
//! the cost; an encoder writes into a `Vec` sized once and copies it in.

use std::marker::PhantomData;

use bytes::{Buf as _, BufMut as _};
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::Status;

/// `Codec` for request `T` and response `U` (what generated code names).
#[derive(Debug, Clone)]
pub struct SliceCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for SliceCodec<T, U> {
    fn default() -> Self {
        SliceCodec(PhantomData)
    }
}

impl<T, U> Codec for SliceCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = SliceEncoder<T>;
    type Decoder = SliceDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        SliceEncoder(PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        SliceDecoder(PhantomData)
    }
}

#[derive(Debug, Clone)]
pub struct SliceEncoder<T>(PhantomData<T>);

impl<T: Message> Encoder for SliceEncoder<T> {
    type Item = T;
    type Error = Status;

    fn encode(&mut self, item: T, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        let mut bytes = Vec::with_capacity(item.encoded_len());
        // A Vec grows as needed, so encoding into it cannot fail.
        item.encode_raw(&mut bytes);
        buf.reserve(bytes.len());
        buf.put_slice(&bytes);
        Ok(())
    }
}

#[derive(Debug, Clone)]
pub struct SliceDecoder<U>(PhantomData<U>);

impl<U: Message + Default> Decoder for SliceDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        let len = buf.remaining();
        let chunk = buf.chunk();
        let item = if chunk.len() >= len {
            U::decode(&chunk[..len])
        } else {
            // Not one slice after all (tonic's buffering changed): copy once.
            let bytes = buf.copy_to_bytes(len);
            let item = U::decode(&bytes[..]).map_err(decode_error)?;
            return Ok(Some(item));
        }
        .map_err(decode_error)?;
        buf.advance(len);
        Ok(Some(item))
    }
}

/// A malformed message is INTERNAL, as in tonic's own codec.
fn decode_error(e: prost::DecodeError) -> Status {
    Status::internal(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candidates::v2 as pb;

    #[test]
    fn round_trip() {
        let msg = pb::GetAllocationCandidatesResponse {
            provider_uuids: vec!["a".into(), "b".into()],
            allocation_requests: Some(pb::AllocationRequests {
                allocation_counts: vec![1, 300, 70000],
                amounts: vec![-1, 1 << 40],
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut bytes = Vec::new();
        msg.encode_raw(&mut bytes);
        let decoded = pb::GetAllocationCandidatesResponse::decode(&bytes[..]).unwrap();
        assert_eq!(decoded, msg);
    }
}
