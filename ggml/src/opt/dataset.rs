//! [`Dataset`]: samples and their labels as f32 rows, in an order that shuffles.

use crate::context::Context;
use crate::error::{Error, Result};
use crate::random::Rng;
use crate::tensor::TensorId;

/// `n_data` samples of `ne_datapoint` f32 features, each with a label row of
/// `ne_label` f32 values (one-hot classes, or targets), as ggml's
/// `ggml_opt_dataset`. The samples keep the order they were given in until
/// [`Dataset::shuffle`]; [`Dataset::batch`], [`Dataset::get_batch`] and
/// [`Dataset::split`] follow the current order.
///
/// ```
/// use ggml::opt::Dataset;
/// use ggml::random::Rng;
/// use ggml::{Context, GgmlType};
///
/// // Four samples of two features, classes 0, 1, 1, 0 of two.
/// let data = vec![0., 0., 0., 1., 1., 0., 1., 1.];
/// let mut ds = Dataset::from_classes(2, data, &[0, 1, 1, 0], 2)?;
/// let (mut train, val) = ds.split(0.25)?;
/// assert_eq!((train.n_data(), val.n_data()), (3, 1));
///
/// let mut ctx = Context::new();
/// let x = ctx.new_tensor_2d(GgmlType::F32, 2, 1); // a batch of one sample
/// let y = ctx.new_tensor_2d(GgmlType::F32, 2, 1);
/// train.shuffle(&mut Rng::new(42));
/// for i in 0..train.n_batches(1) {
///     train.get_batch(&ctx, x, Some(y), i)?;
///     // ... compute the graph on x and y
/// }
/// # Ok::<(), ggml::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    ne_datapoint: usize,
    ne_label: usize,
    data: Vec<f32>,
    labels: Vec<f32>,
    /// The current order: position `i` holds sample `order[i]` of `data`.
    order: Vec<usize>,
}

fn err(msg: String) -> Error {
    Error::Dataset(msg)
}

impl Dataset {
    /// A data set of `data.len() / ne_datapoint` samples: `data` holds the features
    /// sample after sample, `labels` the label rows likewise.
    /// [`Error::Dataset`] when `ne_datapoint` is 0 or the lengths do not make whole
    /// samples with one label row each.
    pub fn new(
        ne_datapoint: usize,
        ne_label: usize,
        data: Vec<f32>,
        labels: Vec<f32>,
    ) -> Result<Dataset> {
        if ne_datapoint == 0 || !data.len().is_multiple_of(ne_datapoint) {
            return Err(err(format!(
                "{} values do not make samples of {ne_datapoint}",
                data.len()
            )));
        }
        let n_data = data.len() / ne_datapoint;
        if labels.len() != n_data * ne_label {
            return Err(err(format!(
                "{} label values for {n_data} samples of {ne_label}",
                labels.len()
            )));
        }
        Ok(Dataset {
            ne_datapoint,
            ne_label,
            data,
            labels,
            order: (0..n_data).collect(),
        })
    }

    /// A data set whose labels are the one-hot rows of the classes `classes[i]` of
    /// `n_classes`. [`Error::Dataset`] when a class is not below `n_classes`, or as
    /// [`Dataset::new`].
    pub fn from_classes(
        ne_datapoint: usize,
        data: Vec<f32>,
        classes: &[usize],
        n_classes: usize,
    ) -> Result<Dataset> {
        let mut labels = vec![0f32; classes.len() * n_classes];
        for (i, &c) in classes.iter().enumerate() {
            if c >= n_classes {
                return Err(err(format!("sample {i}: class {c} of {n_classes}")));
            }
            labels[i * n_classes + c] = 1.0;
        }
        Dataset::new(ne_datapoint, n_classes, data, labels)
    }

    /// Parses CSV text whose lines hold the features of a sample and, last, its class
    /// (a whole number below `n_classes`): the features are multiplied by `scale`, the
    /// class becomes a one-hot label. Empty lines are skipped. [`Error::Dataset`] when
    /// a value does not parse, a line has another number of fields than the first, a
    /// class is not a whole number below `n_classes`, or there are no samples.
    pub fn from_csv(text: &str, n_classes: usize, scale: f32) -> Result<Dataset> {
        let (mut data, mut classes) = (Vec::new(), Vec::new());
        let mut ne_datapoint = None;
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let values = line
                .split(',')
                .map(|v| v.trim().parse::<f32>())
                .collect::<std::result::Result<Vec<f32>, _>>()
                .map_err(|e| err(format!("line {}: {e}", n + 1)))?;
            let ne = values.len() - 1;
            if ne == 0 || *ne_datapoint.get_or_insert(ne) != ne {
                return Err(err(format!(
                    "line {}: {} fields, expected {}",
                    n + 1,
                    values.len(),
                    ne_datapoint.unwrap_or(1) + 1
                )));
            }
            let class = values[ne];
            if class.fract() != 0.0 || !(0.0..n_classes as f32).contains(&class) {
                return Err(err(format!(
                    "line {}: class {class} is not one of 0..{n_classes}",
                    n + 1
                )));
            }
            classes.push(class as usize);
            data.extend(values[..ne].iter().map(|v| v * scale));
        }
        let Some(ne_datapoint) = ne_datapoint else {
            return Err(err("no samples".into()));
        };
        Dataset::from_classes(ne_datapoint, data, &classes, n_classes)
    }

    /// The handwritten digits that `scripts/fetch_digits.py` writes (`digits.csv`:
    /// 1797 samples of 8x8 pixels 0..16 and the digit): 64 features scaled to `[0,
    /// 1]`, one-hot labels of 10 classes. [`Error::Io`] when the file cannot be read,
    /// [`Error::Dataset`] when it is not that CSV.
    pub fn load_digits(path: impl AsRef<std::path::Path>) -> Result<Dataset> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })?;
        let ds = Dataset::from_csv(&text, 10, 1.0 / 16.0)?;
        if ds.ne_datapoint != 64 {
            return Err(err(format!(
                "{}: {} pixels a sample, expected 64",
                path.display(),
                ds.ne_datapoint
            )));
        }
        Ok(ds)
    }

    /// Number of samples.
    pub fn n_data(&self) -> usize {
        self.order.len()
    }

    /// Features per sample.
    pub fn ne_datapoint(&self) -> usize {
        self.ne_datapoint
    }

    /// Values per label row.
    pub fn ne_label(&self) -> usize {
        self.ne_label
    }

    /// The features of the `i`-th sample in the current order; `None` past the end.
    pub fn datapoint(&self, i: usize) -> Option<&[f32]> {
        let k = *self.order.get(i)?;
        Some(&self.data[k * self.ne_datapoint..(k + 1) * self.ne_datapoint])
    }

    /// The label row of the `i`-th sample in the current order; `None` past the end.
    pub fn label(&self, i: usize) -> Option<&[f32]> {
        let k = *self.order.get(i)?;
        Some(&self.labels[k * self.ne_label..(k + 1) * self.ne_label])
    }

    /// Puts the samples in a random order drawn from `rng` (Fisher-Yates): the same
    /// generator state gives the same order on every machine.
    pub fn shuffle(&mut self, rng: &mut Rng) {
        self.shuffle_first(rng, self.order.len());
    }

    /// Shuffles only the first `n` samples of the current order (all of them when `n`
    /// is past the end), as `ggml_opt_dataset_shuffle` with a split index: the
    /// training part moves, the validation part stays.
    pub fn shuffle_first(&mut self, rng: &mut Rng, n: usize) {
        let n = n.min(self.order.len());
        for i in (1..n).rev() {
            self.order.swap(i, rng.below(i + 1));
        }
    }

    /// Splits the samples, in the current order, into a training set and a
    /// validation set (the last `n_data * val_fraction`, rounded to the nearest
    /// whole sample), each in its given order. [`Error::Dataset`] unless `val_fraction` is in `[0,
    /// 1]`.
    pub fn split(&self, val_fraction: f32) -> Result<(Dataset, Dataset)> {
        if !(0.0..=1.0).contains(&val_fraction) {
            return Err(err(format!(
                "validation fraction {val_fraction} is not in [0, 1]"
            )));
        }
        let n_val = (self.n_data() as f64 * f64::from(val_fraction)).round() as usize;
        let n_train = self.n_data() - n_val;
        let part = |range: std::ops::Range<usize>| {
            let mut data = Vec::with_capacity(range.len() * self.ne_datapoint);
            let mut labels = Vec::with_capacity(range.len() * self.ne_label);
            for i in range.clone() {
                // `i < n_data`: the ranges below cover 0..n_data.
                data.extend_from_slice(self.datapoint(i).unwrap_or_default());
                labels.extend_from_slice(self.label(i).unwrap_or_default());
            }
            Dataset {
                ne_datapoint: self.ne_datapoint,
                ne_label: self.ne_label,
                data,
                labels,
                order: (0..range.len()).collect(),
            }
        };
        Ok((part(0..n_train), part(n_train..self.n_data())))
    }

    /// Number of whole batches of `batch_size` samples (a last partial batch is left
    /// out, as in ggml); 0 for a batch size of 0.
    pub fn n_batches(&self, batch_size: usize) -> usize {
        self.n_data().checked_div(batch_size).unwrap_or(0)
    }

    /// The features and labels of batch `ibatch` of `batch_size` samples in the
    /// current order, sample after sample. [`Error::Dataset`] when the batch is not a
    /// whole batch of the data set.
    pub fn batch(&self, batch_size: usize, ibatch: usize) -> Result<(Vec<f32>, Vec<f32>)> {
        if batch_size == 0 || ibatch >= self.n_batches(batch_size) {
            return Err(err(format!(
                "batch {ibatch} of {batch_size} samples: the data set has {} whole batches",
                self.n_batches(batch_size)
            )));
        }
        let mut data = Vec::with_capacity(batch_size * self.ne_datapoint);
        let mut labels = Vec::with_capacity(batch_size * self.ne_label);
        for i in ibatch * batch_size..(ibatch + 1) * batch_size {
            // `i < n_data`: the batch is whole (checked above).
            data.extend_from_slice(self.datapoint(i).unwrap_or_default());
            labels.extend_from_slice(self.label(i).unwrap_or_default());
        }
        Ok((data, labels))
    }

    /// Copies batch `ibatch` into `inputs` and, when given, `labels` (any type and
    /// layout [`Context::set_f32`] takes), as ggml's `ggml_opt_dataset_get_batch`:
    /// the batch size is the number of samples `inputs` holds (its elements over
    /// `ne_datapoint`; `[ne_datapoint, batch]` is the natural shape). Returns the
    /// batch size. [`Error::Dataset`] when `inputs` does not hold whole samples,
    /// `labels` does not hold as many label rows, or the batch is not a whole batch
    /// of the data set; errors of [`Context::set_f32`].
    pub fn get_batch(
        &self,
        ctx: &Context,
        inputs: TensorId,
        labels: Option<TensorId>,
        ibatch: usize,
    ) -> Result<usize> {
        let n_in = ctx.tensor(inputs).nelements();
        if !n_in.is_multiple_of(self.ne_datapoint) {
            return Err(err(format!(
                "'{}' holds {n_in} values, not whole samples of {}",
                ctx.label(inputs),
                self.ne_datapoint
            )));
        }
        let batch_size = n_in / self.ne_datapoint;
        if let Some(l) = labels {
            let n_l = ctx.tensor(l).nelements();
            if n_l != batch_size * self.ne_label {
                return Err(err(format!(
                    "'{}' holds {n_l} values, not {batch_size} labels of {}",
                    ctx.label(l),
                    self.ne_label
                )));
            }
        }
        let (data, label_values) = self.batch(batch_size, ibatch)?;
        ctx.set_f32(inputs, &data)?;
        if let Some(l) = labels {
            ctx.set_f32(l, &label_values)?;
        }
        Ok(batch_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GgmlType;

    /// Sample `i` has features `[i, 10 i]` and class `i % 3`.
    fn numbered(n: usize) -> Dataset {
        let data = (0..n).flat_map(|i| [i as f32, 10.0 * i as f32]).collect();
        let classes: Vec<usize> = (0..n).map(|i| i % 3).collect();
        Dataset::from_classes(2, data, &classes, 3).unwrap()
    }

    fn ids(ds: &Dataset) -> Vec<usize> {
        (0..ds.n_data())
            .map(|i| ds.datapoint(i).unwrap()[0] as usize)
            .collect()
    }

    /// A shuffle is a permutation fixed by the seed, and labels travel with their
    /// samples.
    #[test]
    fn shuffle_is_a_seeded_permutation() {
        let (mut a, mut b) = (numbered(50), numbered(50));
        a.shuffle(&mut Rng::new(7));
        b.shuffle(&mut Rng::new(7));
        assert_eq!(a, b);
        let order = ids(&a);
        assert_ne!(order, (0..50).collect::<Vec<_>>());
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        for (i, &k) in order.iter().enumerate() {
            let mut want = [0f32; 3];
            want[k % 3] = 1.0;
            assert_eq!(a.label(i).unwrap(), want);
            assert_eq!(a.datapoint(i).unwrap()[1], 10.0 * k as f32);
        }
        b.shuffle(&mut Rng::new(8));
        assert_ne!(ids(&b), order);
    }

    /// Batches follow the current order, whole batches only, and land in tensors of
    /// any shape with the right number of values.
    #[test]
    fn batches_copy_samples_in_order() {
        let mut ds = numbered(10);
        ds.shuffle(&mut Rng::new(1));
        let order = ids(&ds);
        assert_eq!(ds.n_batches(4), 2);
        assert_eq!(ds.n_batches(0), 0);
        let mut ctx = Context::new();
        let x = ctx.new_tensor_2d(GgmlType::F32, 2, 4);
        let y = ctx.new_tensor_2d(GgmlType::F16, 3, 4);
        assert_eq!(ds.get_batch(&ctx, x, Some(y), 1).unwrap(), 4);
        let got = ctx.get_f32(x).unwrap();
        let want: Vec<f32> = order[4..8]
            .iter()
            .flat_map(|&k| [k as f32, 10.0 * k as f32])
            .collect();
        assert_eq!(got, want);
        let labels = ctx.get_f32(y).unwrap();
        for (row, &k) in labels.chunks(3).zip(&order[4..8]) {
            assert_eq!(row[k % 3], 1.0);
            assert_eq!(row.iter().sum::<f32>(), 1.0);
        }
        // Batch 2 of 4 would be partial; a tensor of 7 values holds no whole samples;
        // a label tensor of another size does not fit.
        assert!(matches!(
            ds.get_batch(&ctx, x, None, 2),
            Err(Error::Dataset(_))
        ));
        let odd = ctx.new_tensor_1d(GgmlType::F32, 7);
        assert!(matches!(
            ds.get_batch(&ctx, odd, None, 0),
            Err(Error::Dataset(_))
        ));
        assert!(matches!(
            ds.get_batch(&ctx, x, Some(x), 0),
            Err(Error::Dataset(_))
        ));
    }

    /// A split keeps every sample once, the training part first in the current order.
    #[test]
    fn split_partitions_the_current_order() {
        let mut ds = numbered(10);
        ds.shuffle(&mut Rng::new(3));
        let (train, val) = ds.split(0.3).unwrap();
        assert_eq!((train.n_data(), val.n_data()), (7, 3));
        let mut both = ids(&train);
        both.extend(ids(&val));
        assert_eq!(both, ids(&ds));
        assert_eq!(ds.split(0.0).unwrap().1.n_data(), 0);
        assert_eq!(ds.split(1.0).unwrap().0.n_data(), 0);
        for bad in [-0.1, 1.5, f32::NAN] {
            assert!(matches!(ds.split(bad), Err(Error::Dataset(_))), "{bad}");
        }
    }

    /// Sizes that do not fit, bad classes and malformed CSV are typed errors.
    #[test]
    fn malformed_input_is_a_typed_error() {
        let bad = [
            Dataset::new(0, 1, vec![], vec![]),
            Dataset::new(2, 1, vec![1.0; 3], vec![0.0]),
            Dataset::new(2, 1, vec![1.0; 4], vec![0.0]),
            Dataset::from_classes(1, vec![1.0], &[3], 3),
            Dataset::from_csv("", 3, 1.0),
            Dataset::from_csv("1,2,0\n1,2\n", 3, 1.0),
            Dataset::from_csv("1,x,0\n", 3, 1.0),
            Dataset::from_csv("1,2,3\n", 3, 1.0),
            Dataset::from_csv("1,2,0.5\n", 3, 1.0),
            Dataset::from_csv("7\n", 3, 1.0),
        ];
        for (i, r) in bad.into_iter().enumerate() {
            assert!(matches!(r, Err(Error::Dataset(_))), "case {i}: {r:?}");
        }
        let ds = Dataset::from_csv("0,16,2\n\n8,4,0\n", 3, 1.0 / 16.0).unwrap();
        assert_eq!((ds.n_data(), ds.ne_datapoint(), ds.ne_label()), (2, 2, 3));
        assert_eq!(ds.datapoint(0).unwrap(), [0.0, 1.0]);
        assert_eq!(ds.label(1).unwrap(), [1.0, 0.0, 0.0]);
        assert!(matches!(
            Dataset::load_digits("/nonexistent/digits.csv"),
            Err(Error::Io { .. })
        ));
    }

    /// The digits file, where `scripts/fetch_digits.py` has fetched it (the test says
    /// so and passes when it has not): 1797 samples of 64 pixels in [0, 1], about 180
    /// of each digit.
    #[test]
    fn digits_load_when_fetched() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../target/data/digits/digits.csv"
        );
        if !std::path::Path::new(path).exists() {
            eprintln!("{path} not fetched (scripts/fetch_digits.py): not checked");
            return;
        }
        let ds = Dataset::load_digits(path).unwrap();
        assert_eq!(
            (ds.n_data(), ds.ne_datapoint(), ds.ne_label()),
            (1797, 64, 10)
        );
        let mut per_class = [0usize; 10];
        for i in 0..ds.n_data() {
            assert!(ds
                .datapoint(i)
                .unwrap()
                .iter()
                .all(|v| (0.0..=1.0).contains(v)));
            let label = ds.label(i).unwrap();
            per_class[label.iter().position(|&v| v == 1.0).unwrap()] += 1;
        }
        assert!(
            per_class.iter().all(|&n| (170..=190).contains(&n)),
            "{per_class:?}"
        );
    }
}
