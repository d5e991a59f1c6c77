//! Graph-building constructors, by family. Each one checks shapes (panicking with a
//! clear message on a programming error, like `GGML_ASSERT`) and records a node;
//! nothing is computed until the graph runs.

mod attention;
mod binary;
mod copy;
mod matmul;
mod norm;
mod rows;
mod unary;
mod view;

use crate::context::Context;
use crate::op::Op;
use crate::tensor::{Tensor, TensorId, MAX_DIMS, MAX_SRC};
use crate::types::GgmlType;

impl Context {
    /// Records a node with its own (dense) memory.
    pub(crate) fn new_op(
        &mut self,
        typ: GgmlType,
        ne: [usize; MAX_DIMS],
        op: Op,
        src: &[TensorId],
    ) -> TensorId {
        let id = self.new_tensor(typ, &ne);
        self.attach(id, op, src);
        id
    }

    /// Records a node that is a view of `a` (shares its memory) with the given layout.
    pub(crate) fn new_view(
        &mut self,
        a: TensorId,
        ne: [usize; MAX_DIMS],
        nb: [usize; MAX_DIMS],
        offset: usize,
        op: Op,
        src: &[TensorId],
    ) -> TensorId {
        let at = self.tensor(a);
        let (base, base_offs) = match at.view_src {
            Some(b) => (b, at.view_offs),
            None => (a, 0),
        };
        let mut t = Tensor::new(at.typ, ne);
        t.nb = nb;
        t.view_src = Some(base);
        t.view_offs = base_offs + offset;
        let base_t = self.tensor(base);
        let view_end = t.view_offs + t.nbytes();
        assert!(
            view_end <= base_t.nbytes(),
            "view of '{}' ends at byte {view_end}, past its {} bytes",
            base_t.name,
            base_t.nbytes()
        );
        if let Some(d) = &base_t.data {
            t.data = Some(crate::buffer::DataRef {
                buffer: d.buffer.clone(),
                offset: d.offset + t.view_offs,
            });
        }
        if !at.name.is_empty() {
            t.name = format!("{} (view)", at.name);
        }
        let id = self.push(t);
        self.attach(id, op, src);
        id
    }

    fn attach(&mut self, id: TensorId, op: Op, src: &[TensorId]) {
        assert!(src.len() <= MAX_SRC);
        let t = self.tensor_mut(id);
        t.op = op;
        for (slot, s) in t.src.iter_mut().zip(src) {
            *slot = Some(*s);
        }
    }

    /// Records a node whose optional sources keep their slot positions.
    pub(crate) fn attach_opt(&mut self, id: TensorId, op: Op, src: &[Option<TensorId>]) {
        let t = self.tensor_mut(id);
        t.op = op;
        for (slot, s) in t.src.iter_mut().zip(src) {
            *slot = *s;
        }
    }

    pub(crate) fn ne(&self, id: TensorId) -> [usize; MAX_DIMS] {
        self.tensor(id).ne
    }

    pub(crate) fn typ(&self, id: TensorId) -> GgmlType {
        self.tensor(id).typ
    }
}
