//! The operations a graph node can record, each with its typed parameters.

/// Element-wise activation functions (`ggml_unary_op`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `x * sigmoid(x)`.
    Silu,
    /// The tanh approximation of GELU that ggml uses.
    Gelu,
    /// `max(x, 0)`.
    Relu,
    /// `tanh(x)` (logit soft-capping: `c * tanh(x / c)`).
    Tanh,
    /// `-x`.
    Neg,
    /// `1` where `x > 0`, else `0` (the derivative of `relu`).
    Step,
    /// `e^x`.
    Exp,
    /// `ln(x)`.
    Log,
    /// `|x|`.
    Abs,
    /// The sign of `x`: `1`, `-1`, or `0` for zero (and NaN).
    Sgn,
}

/// Gated linear units (`ggml_glu_op`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GluOp {
    /// `silu(gate) * up`.
    SwiGlu,
    /// `gelu(gate) * up`.
    GeGlu,
}

/// The order of [`crate::Context::argsort`] (`ggml_sort_order`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SortOrder {
    /// Smallest value first (`GGML_SORT_ORDER_ASC`).
    Asc,
    /// Largest value first (`GGML_SORT_ORDER_DESC`).
    Desc,
}

/// How rope pairs up the dimensions it rotates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RopeMode {
    /// Adjacent pairs `(x[2i], x[2i+1])`: llama (`GGML_ROPE_TYPE_NORMAL`, 0).
    Normal,
    /// Halves `(x[i], x[i + n_dims/2])`: GPT-NeoX, qwen2 (`GGML_ROPE_TYPE_NEOX`, 2).
    Neox,
}

impl RopeMode {
    /// ggml's integer for the mode.
    pub fn ggml_id(self) -> i32 {
        match self {
            RopeMode::Normal => 0,
            RopeMode::Neox => 2,
        }
    }
}

/// Parameters of `rope_ext`, named as in ggml.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeParams {
    /// Number of leading dimensions of each row that are rotated (even, <= ne0).
    pub n_dims: usize,
    /// Pairing of the rotated dimensions.
    pub mode: RopeMode,
    /// Context length the model was trained with (YaRN correction range).
    pub n_ctx_orig: usize,
    /// Base of the rotation frequencies (10000 for llama).
    pub freq_base: f32,
    /// Position scale (1/factor for linear scaling).
    pub freq_scale: f32,
    /// YaRN extrapolation mix (0 disables YaRN).
    pub ext_factor: f32,
    /// Magnitude scale of cos/sin.
    pub attn_factor: f32,
    /// YaRN fast boundary (32 by default).
    pub beta_fast: f32,
    /// YaRN slow boundary (1 by default).
    pub beta_slow: f32,
}

impl RopeParams {
    /// Plain rope (no scaling, no YaRN) with the given base.
    pub fn new(n_dims: usize, mode: RopeMode, freq_base: f32) -> Self {
        RopeParams {
            n_dims,
            mode,
            n_ctx_orig: 0,
            freq_base,
            freq_scale: 1.0,
            ext_factor: 0.0,
            attn_factor: 1.0,
            beta_fast: 32.0,
            beta_slow: 1.0,
        }
    }
}

/// Parameters of [`crate::Context::soft_max_ext`]: `softmax(a * scale + slope * mask)`.
///
/// ```
/// use ggml::SoftMaxParams;
/// let p = SoftMaxParams { scale: 0.125, ..Default::default() };
/// assert_eq!((p.scale, p.max_bias), (0.125, 0.0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SoftMaxParams {
    /// Factor on the scores before the mask is added (`1/sqrt(head_dim)` in attention);
    /// 1 by default.
    pub scale: f32,
    /// ALiBi's maximum bias: 0 (the default) turns ALiBi off; above 0 head `h` (dim
    /// 2) gets ggml's slope for `h` and a mask is required.
    pub max_bias: f32,
}

impl Default for SoftMaxParams {
    fn default() -> Self {
        SoftMaxParams {
            scale: 1.0,
            max_bias: 0.0,
        }
    }
}

/// Parameters of [`crate::Context::flash_attn_ext`]:
/// `softmax(softcap(q·kᵀ·scale) + slope * mask)·v`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlashAttnParams {
    /// Factor on the scores (`1/sqrt(head_dim)`); 1 by default.
    pub scale: f32,
    /// ALiBi's maximum bias; 0 (the default) turns ALiBi off.
    pub max_bias: f32,
    /// `c` of the soft cap `c * tanh(s / c)` on the scores; 0 (the default) turns it
    /// off.
    pub logit_softcap: f32,
}

impl Default for FlashAttnParams {
    fn default() -> Self {
        FlashAttnParams {
            scale: 1.0,
            max_bias: 0.0,
            logit_softcap: 0.0,
        }
    }
}

/// What a node computes. Sources are in [`crate::Tensor::src`], in ggml's order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    /// A leaf: data set from outside.
    None,

    // Views: no work at compute time.
    /// `view_1d..4d` (src0 = the viewed tensor).
    View,
    /// `reshape_*`.
    Reshape,
    /// `permute`: `axes[i]` is where source dimension `i` goes.
    Permute([usize; 4]),
    /// `transpose` (swap dims 0 and 1).
    Transpose,

    // Copies.
    /// Copy src0 into src1's memory, converting the type (`ggml_cpy`); the node is a view of src1.
    Cpy,
    /// Contiguous copy of src0 (`ggml_cont`), possibly into another type.
    Cont,
    /// Concatenate src0 and src1 along `dim`.
    Concat {
        /// The dimension joined along.
        dim: usize,
    },
    /// Tile src0 to the node's shape.
    Repeat,

    // Element-wise.
    /// `src0 + src1`, src1 broadcast.
    Add,
    /// `src0 - src1`, src1 broadcast.
    Sub,
    /// `src0 * src1`, src1 broadcast.
    Mul,
    /// `src0 / src1`, src1 broadcast.
    Div,
    /// `s * x + b`.
    Scale {
        /// The factor.
        s: f32,
        /// The bias added after scaling.
        b: f32,
    },
    /// `x * x`.
    Sqr,
    /// `sqrt(x)`.
    Sqrt,
    /// `x` limited to `[min, max]` (`MAX(MIN(x, max), min)`).
    Clamp {
        /// The lower bound.
        min: f32,
        /// The upper bound.
        max: f32,
    },
    /// An activation.
    Unary(UnaryOp),
    /// A gated unit over one tensor (halves of dim 0) or two (src1 present).
    Glu {
        /// Which unit.
        op: GluOp,
        /// For one source: whether the value half comes first.
        swapped: bool,
    },

    // Reductions and normalisation along rows.
    /// Sum of each row (result ne0 = 1).
    SumRows,
    /// Mean of each row (result ne0 = 1).
    Mean,
    /// `(x - mean) / sqrt(var + eps)` per row.
    Norm {
        /// Added to the variance.
        eps: f32,
    },
    /// `x / sqrt(mean(x^2) + eps)` per row.
    RmsNorm {
        /// Added to the mean square.
        eps: f32,
    },
    /// Index of the largest value of each row (I32).
    Argmax,
    /// The indices (I32) that sort each row, in ggml's order for equal values.
    Argsort {
        /// Ascending or descending.
        order: SortOrder,
    },
    /// The indices (I32) of the `ne0` largest values of each row of src0, as ggml's
    /// `top_k` orders them.
    TopK,

    // Matrices.
    /// `src0ᵀ·src1` in ggml's convention (dot products of rows).
    MulMat,
    /// `mul_mat` with a matrix of the stack src0 chosen per row by the I32 ids in
    /// src2 (mixture of experts).
    MulMatId,
    /// Each run of `n` consecutive values of src0 times the orthonormal Walsh-Hadamard
    /// matrix of size `n` (ggml: `mul_mat` with `GGML_HINT_SRC0_IS_HADAMARD`, computed
    /// by `ggml_compute_forward_fwht`).
    Hadamard {
        /// The matrix size, a power of two.
        n: u32,
    },
    /// Rows of src0 picked by the I32 indices in src1.
    GetRows,
    /// Rows of src0 (values) written into src2 (destination) at the indices in src1; a view of src2.
    SetRows,

    // Attention.
    /// `softmax(x * scale + slope * mask)` per row (src1 = optional mask).
    SoftMax {
        /// Factor on the scores (see [`SoftMaxParams`]).
        scale: f32,
        /// ALiBi's maximum bias; 0 turns it off.
        max_bias: f32,
    },
    /// Rotary position embedding (src1 = I32 positions, src2 = optional frequency factors).
    Rope(RopeParams),
    /// Sets entries above the diagonal shifted by `n_past` to -inf.
    DiagMaskInf {
        /// How many positions precede the first row.
        n_past: usize,
    },
    /// Sets entries above the diagonal shifted by `n_past` to 0 (the gradient of
    /// [`Op::DiagMaskInf`]).
    DiagMaskZero {
        /// How many positions precede the first row.
        n_past: usize,
    },
    /// Fused attention: softmax(q·kᵀ·scale + mask)·v (src0 q, src1 k, src2 v, src3 mask).
    /// `kv_split`: for one query against many keys, the number of key ranges computed
    /// apart and merged (see `Context::flash_attn_ext_set_kv_split`); 1 = none.
    FlashAttnExt {
        /// Factor on the scores (see [`FlashAttnParams`]).
        scale: f32,
        /// ALiBi's maximum bias; 0 turns it off.
        max_bias: f32,
        /// Soft cap on the scores; 0 turns it off.
        logit_softcap: f32,
        /// Key ranges for one query against many keys (1 = no split).
        kv_split: u32,
    },

    // Training: losses, backward passes, optimizer steps.
    /// `-sum(src1 * log_softmax(src0)) / rows`: one f32 value.
    CrossEntropyLoss,
    /// `(softmax(src1) - src2) * src0 / rows`: src0 the loss's gradient (one value),
    /// src1 the logits, src2 the labels.
    CrossEntropyLossBack,
    /// `scale * y * (dy - dot(dy, y))` per row: src0 = dy, src1 = y (the softmax's
    /// output).
    SoftMaxBack {
        /// The forward softmax's factor on its input.
        scale: f32,
    },
    /// The gradient of `rms_norm` (src0 = the output's gradient, src1 = its input).
    RmsNormBack {
        /// The forward op's epsilon.
        eps: f32,
    },
    /// The gradient of `norm` (src0 = the output's gradient, src1 = its input).
    NormBack {
        /// The forward op's epsilon.
        eps: f32,
    },
    /// The gradient of `rope_ext`: the rotation reversed (src1 = positions, src2 =
    /// optional frequency factors).
    RopeBack(RopeParams),
    /// One AdamW step written into src0 (the parameter), src2 and src3 (the moments)
    /// from the gradient src1 and the 7 hyper-parameters in src4; a view of src0.
    OptStepAdamw,
    /// One SGD step written into src0 from the gradient src1 and the 2
    /// hyper-parameters in src2; a view of src0.
    OptStepSgd,
    // Gradients (`ggml/src/ops/backward.rs`).
    /// Sum of every element of src0 (result shape `[1, 1, 1, 1]`).
    Sum,
    /// The sum of src0's tiles of the node's shape: the inverse of [`Op::Repeat`].
    RepeatBack,
    /// `dst[i0, i1, i2, i3] = Σ_k src0[i0, k, i2/r2, i3/r3] · src1[i1, k, i2, i3]`
    /// (ggml's `out_prod`, the gradient of `mul_mat`).
    OutProd,
    /// The rows of src0 added into a zero tensor of the node's shape at the I32 indices
    /// in src1: the gradient of [`Op::GetRows`].
    GetRowsBack,
    /// `dy · silu'(x)` with src0 = `dy`, src1 = `x`.
    SiluBack,
    /// `dy · gelu'(x)` (the tanh approximation) with src0 = `dy`, src1 = `x`.
    GeluBack,
    /// src0 (or zeros when src0 is absent) with src1 added into the view of it with
    /// strides `nb1..nb3` and byte offset `offset` (ggml's `acc`).
    Acc {
        /// Row stride of the view, in bytes.
        nb1: usize,
        /// Plane stride of the view, in bytes.
        nb2: usize,
        /// Volume stride of the view, in bytes.
        nb3: usize,
        /// Where the view starts, in bytes.
        offset: usize,
    },
}

impl Op {
    /// ggml's upper-case name of the op (`"MUL_MAT"`), as graph dumps show it.
    pub fn name(&self) -> &'static str {
        match self {
            Op::None => "NONE",
            Op::View => "VIEW",
            Op::Reshape => "RESHAPE",
            Op::Permute(_) => "PERMUTE",
            Op::Transpose => "TRANSPOSE",
            Op::Cpy => "CPY",
            Op::Cont => "CONT",
            Op::Concat { .. } => "CONCAT",
            Op::Repeat => "REPEAT",
            Op::Add => "ADD",
            Op::Sub => "SUB",
            Op::Mul => "MUL",
            Op::Div => "DIV",
            Op::Scale { .. } => "SCALE",
            Op::Sqr => "SQR",
            Op::Sqrt => "SQRT",
            Op::Clamp { .. } => "CLAMP",
            Op::Unary(UnaryOp::Silu) => "SILU",
            Op::Unary(UnaryOp::Gelu) => "GELU",
            Op::Unary(UnaryOp::Relu) => "RELU",
            Op::Unary(UnaryOp::Tanh) => "TANH",
            Op::Unary(UnaryOp::Neg) => "NEG",
            Op::Unary(UnaryOp::Step) => "STEP",
            Op::Unary(UnaryOp::Exp) => "EXP",
            Op::Unary(UnaryOp::Log) => "LOG",
            Op::Unary(UnaryOp::Abs) => "ABS",
            Op::Unary(UnaryOp::Sgn) => "SGN",
            Op::Glu {
                op: GluOp::SwiGlu, ..
            } => "SWIGLU",
            Op::Glu {
                op: GluOp::GeGlu, ..
            } => "GEGLU",
            Op::SumRows => "SUM_ROWS",
            Op::Mean => "MEAN",
            Op::Norm { .. } => "NORM",
            Op::RmsNorm { .. } => "RMS_NORM",
            Op::Argmax => "ARGMAX",
            Op::Argsort { .. } => "ARGSORT",
            Op::TopK => "TOP_K",
            Op::MulMat => "MUL_MAT",
            Op::MulMatId => "MUL_MAT_ID",
            Op::Hadamard { .. } => "HADAMARD",
            Op::GetRows => "GET_ROWS",
            Op::SetRows => "SET_ROWS",
            Op::SoftMax { .. } => "SOFT_MAX",
            Op::Rope(_) => "ROPE",
            Op::DiagMaskInf { .. } => "DIAG_MASK_INF",
            Op::FlashAttnExt { .. } => "FLASH_ATTN_EXT",
            Op::CrossEntropyLoss => "CROSS_ENTROPY_LOSS",
            Op::CrossEntropyLossBack => "CROSS_ENTROPY_LOSS_BACK",
            Op::SoftMaxBack { .. } => "SOFT_MAX_BACK",
            Op::RmsNormBack { .. } => "RMS_NORM_BACK",
            Op::NormBack { .. } => "NORM_BACK",
            Op::RopeBack(_) => "ROPE_BACK",
            Op::OptStepAdamw => "OPT_STEP_ADAMW",
            Op::OptStepSgd => "OPT_STEP_SGD",
            Op::DiagMaskZero { .. } => "DIAG_MASK_ZERO",
            Op::Sum => "SUM",
            Op::RepeatBack => "REPEAT_BACK",
            Op::OutProd => "OUT_PROD",
            Op::GetRowsBack => "GET_ROWS_BACK",
            Op::SiluBack => "SILU_BACK",
            Op::GeluBack => "GELU_BACK",
            Op::Acc { .. } => "ACC",
        }
    }

    /// The sources the node writes into besides its own memory (AdamW's moments):
    /// they must be writable when the graph runs.
    pub fn written_sources(&self) -> &'static [usize] {
        match self {
            Op::OptStepAdamw => &[2, 3],
            _ => &[],
        }
    }

    /// Whether the node only reinterprets its source's memory (no work at compute time).
    pub fn is_view(&self) -> bool {
        matches!(
            self,
            Op::View | Op::Reshape | Op::Permute(_) | Op::Transpose
        )
    }
}
