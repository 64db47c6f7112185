//! TensorFlow Serving's `PredictionService` messages as both sides use them: the prost
//! messages of `proto/tfserving.proto`, the service path, the signature metadata names, the
//! dtype mapping to Triton datatypes and the `ModelSpec` of every call.

use crate::tensor::DataType;

#[allow(clippy::all)]
pub mod pb;

/// Path prefix of the service's methods.
pub const SERVICE_PATH: &str = "/tensorflow.serving.PredictionService/";
/// The metadata field perf_analyzer asks for, and the Any type URL of its value.
pub const SIGNATURE_DEF: &str = "signature_def";
pub const SIGNATURE_DEF_MAP_URL: &str = "type.googleapis.com/tensorflow.serving.SignatureDefMap";

/// TensorFlow dtype to Triton datatype; `None` for types perf_analyzer cannot send.
pub fn from_tf(dtype: i32) -> Option<DataType> {
    use pb::DataType as T;
    Some(match T::try_from(dtype).ok()? {
        T::DtFloat => DataType::F32,
        T::DtDouble => DataType::F64,
        T::DtInt32 => DataType::I32,
        T::DtUint8 => DataType::U8,
        T::DtInt16 => DataType::I16,
        T::DtInt8 => DataType::I8,
        T::DtString => DataType::Bytes,
        T::DtInt64 => DataType::I64,
        T::DtBool => DataType::Bool,
        T::DtBfloat16 => DataType::Bf16,
        T::DtUint16 => DataType::U16,
        T::DtHalf => DataType::F16,
        T::DtUint32 => DataType::U32,
        T::DtUint64 => DataType::U64,
        T::DtInvalid | T::DtComplex64 => return None,
    })
}

/// Triton datatype to TensorFlow dtype.
pub fn to_tf(dtype: DataType) -> pb::DataType {
    use pb::DataType as T;
    match dtype {
        DataType::Bool => T::DtBool,
        DataType::U8 => T::DtUint8,
        DataType::U16 => T::DtUint16,
        DataType::U32 => T::DtUint32,
        DataType::U64 => T::DtUint64,
        DataType::I8 => T::DtInt8,
        DataType::I16 => T::DtInt16,
        DataType::I32 => T::DtInt32,
        DataType::I64 => T::DtInt64,
        DataType::F16 => T::DtHalf,
        DataType::F32 => T::DtFloat,
        DataType::F64 => T::DtDouble,
        DataType::Bf16 => T::DtBfloat16,
        DataType::Bytes => T::DtString,
    }
}

/// `model_spec` of every call: name, `-x` as the version label, the signature.
pub fn model_spec(model: &str, version: &str, signature: &str) -> pb::ModelSpec {
    pb::ModelSpec {
        name: model.into(),
        signature_name: signature.into(),
        version_choice: (!version.is_empty())
            .then(|| pb::model_spec::VersionChoice::VersionLabel(version.into())),
    }
}
