"""Standard datasets read from local files (nothing is downloaded), and a synthetic one.

* ``MNIST`` / ``FashionMNIST``: the four IDX files (optionally gzipped), looked up in
  ``root/<Name>/raw``, ``root/<Name>`` and ``root``.
* ``CIFAR10``: the binary version (``cifar-10-batches-bin``: ``data_batch_1.bin`` ..
  ``data_batch_5.bin``, ``test_batch.bin``), looked up in ``root/cifar-10-batches-bin`` and ``root``.
* ``Synthetic``: Gaussian blobs around class-dependent means; learnable, for demos and tests.

Items are ``(image, label)`` with the image a NumPy uint8 array ((28, 28) for MNIST, (32, 32, 3)
for CIFAR10, as PIL images would be) passed through ``transform``, and the label an int passed
through ``target_transform``. Whole arrays are available as ``.data`` and ``.targets``.

Example:
    >>> from funcgrad.data.datasets import Synthetic
    >>> ds = Synthetic(n=100, shape=(2,), num_classes=3, seed=0)
    >>> x, y = ds[0]
    >>> x.shape, 0 <= y < 3
    ((2,), True)
"""
import gzip
import os

import numpy as np

from .dataset import Dataset, _as_index

__all__ = ["MNIST", "FashionMNIST", "CIFAR10", "Synthetic", "read_idx", "write_idx"]

_IDX_TYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_IDX_CODES = {np.dtype(v).newbyteorder("=").str[1:]: k for k, v in _IDX_TYPES.items()}


def _open(path):
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rb")
    return open(path, "rb")


def read_idx(path):
    """Read an IDX file (the MNIST format; gzipped or not) into a NumPy array.

    Example:
        >>> from funcgrad.data.datasets import read_idx, write_idx
        >>> import numpy as np, tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "a-idx1-ubyte")
        >>> write_idx(p, np.array([3, 1, 4], np.uint8))
        >>> read_idx(p).tolist()
        [3, 1, 4]
    """
    with _open(path) as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"read_idx: {path} is not an IDX file (its first bytes are "
                         f"{data[:4]!r}; an IDX file starts with two zero bytes, a type code "
                         f"and the number of dimensions)")
    code, ndim = data[2], data[3]
    if code not in _IDX_TYPES:
        raise ValueError(f"read_idx: {path} has unknown IDX type code 0x{code:02X}; known: "
                         f"{sorted(hex(c) for c in _IDX_TYPES)}")
    dtype = _IDX_TYPES[code]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ValueError(f"read_idx: {path} is truncated: {len(data)} bytes, but its header "
                         f"alone needs {header}")
    shape = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    count = int(np.prod(shape, dtype=np.int64))
    expected = header + count * dtype.itemsize
    if len(data) != expected:
        raise ValueError(f"read_idx: {path} has {len(data)} bytes, but its header (shape "
                         f"{shape}, {dtype.name}) implies {expected}")
    arr = np.frombuffer(data, dtype=dtype, count=count, offset=header).reshape(shape)
    return arr.astype(dtype.newbyteorder("="))


def write_idx(path, array, compress=None):
    """Write ``array`` as an IDX file (gzipped when ``compress`` or when ``path`` ends in .gz).

    Example:
        >>> from funcgrad.data.datasets import read_idx, write_idx
        >>> import numpy as np, tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "x-idx3-ubyte.gz")
        >>> write_idx(p, np.zeros((2, 3, 3), np.uint8))
        >>> read_idx(p).shape
        (2, 3, 3)
    """
    arr = np.asarray(array)
    key = arr.dtype.newbyteorder("=").str[1:]
    if key not in _IDX_CODES:
        raise ValueError(f"write_idx: IDX cannot store dtype {arr.dtype}; use uint8, int8, "
                         f"int16, int32, float32 or float64")
    code = _IDX_CODES[key]
    header = bytes([0, 0, code, arr.ndim]) + np.asarray(arr.shape, dtype=">u4").tobytes()
    body = np.ascontiguousarray(arr, dtype=_IDX_TYPES[code]).tobytes()
    if compress is None:
        compress = str(path).endswith(".gz")
    opener = gzip.open if compress else open
    with opener(path, "wb") as f:
        f.write(header + body)


class _ArrayImageDataset(Dataset):
    """Shared item logic: ``data[i]`` and ``int(targets[i])`` through the transforms."""

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        i = _as_index(index, len(self), f"{type(self).__name__}.__getitem__")
        img, target = self.data[i], int(self.targets[i])
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    def __getitems__(self, indices):
        idx = np.asarray(indices, dtype=np.int64)
        n = len(self)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"{type(self).__name__}.__getitems__: indices out of range for "
                             f"{n} items: {[int(i) for i in idx if not -n <= i < n][:5]}")
        imgs, targets = self.data[idx], self.targets[idx].tolist()
        t, tt = self.transform, self.target_transform
        out = []
        for img, target in zip(imgs, targets):
            if t is not None:
                img = t(img)
            if tt is not None:
                target = tt(target)
            out.append((img, target))
        return out


class MNIST(_ArrayImageDataset):
    """The MNIST digits from local IDX files: 28x28 uint8 images, labels 0-9.

    Files (optionally with ``.gz``): ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
    ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``, in ``root/MNIST/raw``,
    ``root/MNIST`` or ``root`` (the class name stands for MNIST in subclasses).

    Example:
        >>> from funcgrad.data.datasets import MNIST, write_idx
        >>> import numpy as np, tempfile, os
        >>> root = tempfile.mkdtemp()
        >>> write_idx(os.path.join(root, "t10k-images-idx3-ubyte"), np.zeros((2, 28, 28), np.uint8))
        >>> write_idx(os.path.join(root, "t10k-labels-idx1-ubyte"), np.array([7, 2], np.uint8))
        >>> ds = MNIST(root, train=False)
        >>> len(ds), ds[0][1]
        (2, 7)
    """

    classes = [str(d) for d in range(10)]
    _files = {True: ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
              False: ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}

    def __init__(self, root, train=True, transform=None, target_transform=None):
        self.root = os.fspath(root)
        self.train = bool(train)
        self.transform = transform
        self.target_transform = target_transform
        name = type(self).__name__
        dirs = [os.path.join(self.root, name, "raw"), os.path.join(self.root, name), self.root]
        images_name, labels_name = self._files[self.train]
        images_path = _find(dirs, images_name)
        labels_path = _find(dirs, labels_name)
        if images_path is None or labels_path is None:
            missing = [n for n, p in ((images_name, images_path), (labels_name, labels_path))
                       if p is None]
            raise FileNotFoundError(
                f"{name}: cannot find {' and '.join(missing)} (or the same with .gz) for the "
                f"{'training' if self.train else 'test'} split. Looked in: {', '.join(dirs)}. "
                f"Nothing is downloaded at run time: get the four {name} IDX files "
                f"({', '.join(self._files[True] + self._files[False])}, gzipped or not) and "
                f"put them in {dirs[0]}")
        self.data = read_idx(images_path)
        targets = read_idx(labels_path)
        if self.data.ndim != 3 or targets.ndim != 1 or len(targets) != len(self.data):
            raise ValueError(f"{name}: {images_path} holds shape {self.data.shape} and "
                             f"{labels_path} holds shape {targets.shape}; expected (N, H, W) "
                             f"images and N labels")
        self.targets = targets.astype(np.int64)


class FashionMNIST(MNIST):
    """Fashion-MNIST from local IDX files (same file names and format as MNIST), looked up in
    ``root/FashionMNIST/raw``, ``root/FashionMNIST`` or ``root``.

    Example:
        >>> from funcgrad.data.datasets import FashionMNIST
        >>> FashionMNIST.classes[:2]
        ['T-shirt/top', 'Trouser']
    """

    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
               "Sneaker", "Bag", "Ankle boot"]


def _find(dirs, name):
    for d in dirs:
        for candidate in (name, name + ".gz"):
            path = os.path.join(d, candidate)
            if os.path.isfile(path):
                return path
    return None


class CIFAR10(_ArrayImageDataset):
    """CIFAR-10 from the local binary files: 32x32x3 uint8 images (HWC), labels 0-9.

    Reads ``data_batch_1.bin`` .. ``data_batch_5.bin`` (train) or ``test_batch.bin`` (test)
    from ``root/cifar-10-batches-bin`` or ``root``; each record is one label byte followed by
    3072 bytes: the red, green and blue 32x32 planes, row by row. (The Python "pickle"
    version of CIFAR-10 is never read: unpickling can run arbitrary code.)

    Example:
        >>> from funcgrad.data.datasets import CIFAR10
        >>> import numpy as np, tempfile, os
        >>> root = tempfile.mkdtemp()
        >>> rec = np.zeros((1, 3073), np.uint8); rec[0, 0] = 4
        >>> rec.tofile(os.path.join(root, "test_batch.bin"))
        >>> ds = CIFAR10(root, train=False)
        >>> ds[0][0].shape, ds[0][1]
        ((32, 32, 3), 4)
    """

    classes = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
               "truck"]
    train_files = [f"data_batch_{k}.bin" for k in range(1, 6)]
    test_files = ["test_batch.bin"]
    _RECORD = 1 + 3 * 32 * 32

    def __init__(self, root, train=True, transform=None, target_transform=None):
        self.root = os.fspath(root)
        self.train = bool(train)
        self.transform = transform
        self.target_transform = target_transform
        dirs = [os.path.join(self.root, "cifar-10-batches-bin"), self.root]
        names = self.train_files if self.train else self.test_files
        found = {n: _find(dirs, n) for n in names}
        missing = [n for n, p in found.items() if p is None]
        if missing:
            raise FileNotFoundError(
                f"CIFAR10: cannot find {', '.join(missing)} for the "
                f"{'training' if self.train else 'test'} split. Looked in: {', '.join(dirs)}. "
                f"Nothing is downloaded at run time: get the binary version of CIFAR-10 "
                f"(cifar-10-binary.tar.gz), extract it, and put its cifar-10-batches-bin folder "
                f"(data_batch_1.bin .. data_batch_5.bin, test_batch.bin) in {self.root}")
        chunks = []
        for name in names:
            with _open(found[name]) as f:
                raw = np.frombuffer(f.read(), dtype=np.uint8)
            if raw.size % self._RECORD:
                raise ValueError(f"CIFAR10: {found[name]} has {raw.size} bytes, not a multiple "
                                 f"of the {self._RECORD}-byte record (1 label + 3072 pixels); "
                                 f"is it the binary version?")
            chunks.append(raw.reshape(-1, self._RECORD))
        records = np.concatenate(chunks) if len(chunks) > 1 else chunks[0]
        labels = records[:, 0]
        if labels.size and labels.max() > 9:
            raise ValueError(f"CIFAR10: found label {int(labels.max())} > 9; the files are not "
                             f"CIFAR-10 binary batches")
        self.targets = labels.astype(np.int64)
        self.data = np.ascontiguousarray(
            records[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))


class Synthetic(Dataset):
    """A learnable classification problem: ``x = mean[y] + noise * N(0, 1)``.

    Class means are drawn from N(0, separation^2) per class, labels uniformly; everything is
    fixed by ``seed``. Items are ``(float32 array of shape shape, int label)``.

    Example:
        >>> from funcgrad.data.datasets import Synthetic
        >>> ds = Synthetic(n=8, shape=(1, 4, 4), num_classes=2, seed=3)
        >>> x, y = ds[5]
        >>> x.shape, x.dtype.name, y in (0, 1)
        ((1, 4, 4), 'float32', True)
    """

    def __init__(self, n=1000, shape=(1, 28, 28), num_classes=10, seed=0, noise=1.0,
                 separation=1.0, transform=None, target_transform=None):
        n = int(n)
        if n < 0:
            raise ValueError(f"Synthetic: n must be >= 0, got {n}")
        if int(num_classes) < 1:
            raise ValueError(f"Synthetic: num_classes must be >= 1, got {num_classes}")
        self.shape = tuple(int(s) for s in np.atleast_1d(shape))
        self.num_classes = int(num_classes)
        self.seed = seed
        self.transform = transform
        self.target_transform = target_transform
        rng = np.random.default_rng(seed)
        self.means = (separation * rng.standard_normal((self.num_classes,) + self.shape)
                      ).astype(np.float32)
        self.targets = rng.integers(0, self.num_classes, size=n).astype(np.int64)
        noise_arr = rng.standard_normal((n,) + self.shape, dtype=np.float32)
        self.data = self.means[self.targets] + np.float32(noise) * noise_arr

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        i = _as_index(index, len(self), "Synthetic.__getitem__")
        x, y = self.data[i], int(self.targets[i])
        if self.transform is not None:
            x = self.transform(x)
        if self.target_transform is not None:
            y = self.target_transform(y)
        return x, y

    __getitems__ = _ArrayImageDataset.__getitems__
