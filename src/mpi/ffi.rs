//! libmpi bindings (being written).
