//! Property-testing support: an f64 reference evaluator of every op and proptest
//! strategies for tensors (random shapes, strides, views).
