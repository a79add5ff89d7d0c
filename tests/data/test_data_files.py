"""MNIST / FashionMNIST (IDX, gzipped or not), CIFAR10 (binary), and Synthetic."""
import gzip
import os

import numpy as np
import pytest

from funcgrad.data import DataLoader
from funcgrad.data import transforms as T
from funcgrad.data.datasets import CIFAR10, MNIST, FashionMNIST, Synthetic, read_idx, write_idx


def _idx_bytes(code, shape, payload):
    head = bytes([0, 0, code, len(shape)]) + b"".join(d.to_bytes(4, "big") for d in shape)
    return head + payload


def test_read_idx_by_hand_made_bytes(tmp_path):
    p = tmp_path / "labels-idx1-ubyte"
    p.write_bytes(_idx_bytes(0x08, (3,), bytes([7, 0, 255])))
    assert read_idx(p).tolist() == [7, 0, 255]
    q = tmp_path / "ints-idx2-int.gz"
    with gzip.open(q, "wb") as f:      # big-endian int32 2x2
        f.write(_idx_bytes(0x0C, (2, 2), np.array([[1, -2], [300, 4]], ">i4").tobytes()))
    out = read_idx(q)
    assert out.dtype == np.int32 and out.tolist() == [[1, -2], [300, 4]]


def test_write_then_read_roundtrip_all_types(tmp_path):
    for dtype in (np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64):
        arr = (np.arange(24).reshape(2, 3, 4) - 5).astype(dtype)
        for name in ("a-idx", "a-idx.gz"):
            path = tmp_path / f"{np.dtype(dtype).name}-{name}"
            write_idx(path, arr)
            back = read_idx(path)
            assert back.dtype == np.dtype(dtype) and np.array_equal(back, arr)
    assert (tmp_path / "uint8-a-idx.gz").read_bytes()[:2] == b"\x1f\x8b"


def test_read_idx_errors(tmp_path):
    bad = tmp_path / "bad"
    bad.write_bytes(b"\x01\x02\x08\x01")
    with pytest.raises(ValueError, match="read_idx: .*bad is not an IDX file"):
        read_idx(bad)
    short = tmp_path / "short"
    short.write_bytes(_idx_bytes(0x08, (5,), bytes(3)))
    with pytest.raises(ValueError, match=r"has 11 bytes, but its header \(shape \(5,\), uint8\) implies 13"):
        read_idx(short)
    with pytest.raises(ValueError, match="write_idx: IDX cannot store dtype int64"):
        write_idx(tmp_path / "x", np.zeros(2, np.int64))


def _write_mnist(folder, n_train=6, n_test=4, gz=False):
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    arrays = {}
    for split, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n).astype(np.uint8)
        suffix = ".gz" if gz else ""
        write_idx(os.path.join(folder, f"{split}-images-idx3-ubyte{suffix}"), images)
        write_idx(os.path.join(folder, f"{split}-labels-idx1-ubyte{suffix}"), labels)
        arrays[split] = (images, labels)
    return arrays


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_reads_both_splits(tmp_path, gz):
    arrays = _write_mnist(tmp_path / "MNIST" / "raw", gz=gz)
    train = MNIST(tmp_path, train=True)
    test = MNIST(tmp_path, train=False, transform=T.ToArray(), target_transform=lambda y: y + 100)
    assert len(train) == 6 and len(test) == 4
    img, label = train[2]
    assert img.dtype == np.uint8 and img.shape == (28, 28)
    assert np.array_equal(img, arrays["train"][0][2]) and label == int(arrays["train"][1][2])
    x, y = test[1]
    assert x.shape == (1, 28, 28) and x.dtype == np.float32
    np.testing.assert_allclose(x[0], arrays["t10k"][0][1] / 255.0, rtol=1e-6)
    assert y == int(arrays["t10k"][1][1]) + 100
    assert train.targets.dtype == np.int64 and train.data.shape == (6, 28, 28)
    batch = next(iter(DataLoader(train, batch_size=4)))
    assert batch[0].shape == (4, 28, 28) and batch[1].tolist() == arrays["train"][1][:4].tolist()


def test_fashion_mnist_uses_its_own_folder_and_root_fallback(tmp_path):
    _write_mnist(tmp_path / "FashionMNIST" / "raw")
    assert len(FashionMNIST(tmp_path)) == 6
    flat = tmp_path / "flat"
    _write_mnist(flat, n_train=3, gz=True)
    assert len(MNIST(flat)) == 3
    assert FashionMNIST.classes[9] == "Ankle boot"


def test_missing_files_say_where_to_put_what(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        MNIST(tmp_path, train=True)
    msg = str(err.value)
    assert "train-images-idx3-ubyte" in msg and "train-labels-idx1-ubyte" in msg
    assert os.path.join(str(tmp_path), "MNIST", "raw") in msg and "Nothing is downloaded" in msg
    with pytest.raises(FileNotFoundError) as err:
        CIFAR10(tmp_path, train=True)
    msg = str(err.value)
    assert "data_batch_1.bin" in msg and "data_batch_5.bin" in msg
    assert "cifar-10-batches-bin" in msg and "binary version" in msg


def _write_cifar(folder, per_file=3):
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(1)
    out = {}
    for name in [f"data_batch_{k}.bin" for k in range(1, 6)] + ["test_batch.bin"]:
        labels = rng.integers(0, 10, size=per_file).astype(np.uint8)
        planes = rng.integers(0, 256, size=(per_file, 3, 32, 32), dtype=np.uint8)
        records = np.concatenate([labels[:, None], planes.reshape(per_file, -1)], axis=1)
        records.tofile(os.path.join(folder, name))
        out[name] = (labels, planes)
    return out


def test_cifar10_binary_layout(tmp_path):
    written = _write_cifar(tmp_path / "cifar-10-batches-bin")
    train = CIFAR10(tmp_path, train=True)
    test = CIFAR10(tmp_path, train=False, transform=T.ToArray())
    assert len(train) == 15 and len(test) == 3
    labels, planes = written["data_batch_2.bin"]
    img, label = train[4]                      # second record of the second file
    assert img.shape == (32, 32, 3) and img.dtype == np.uint8
    assert label == int(labels[1])
    # red plane first, then green, then blue; pixel (row 5, col 7)
    assert img[5, 7].tolist() == planes[1, :, 5, 7].tolist()
    x, y = test[0]
    assert x.shape == (3, 32, 32)
    np.testing.assert_allclose(x * 255, written["test_batch.bin"][1][0], atol=1e-3)
    assert train.classes[3] == "cat"


def test_cifar10_rejects_wrong_sizes(tmp_path):
    folder = tmp_path / "cifar-10-batches-bin"
    folder.mkdir()
    (folder / "test_batch.bin").write_bytes(bytes(3074))
    with pytest.raises(ValueError, match="3074 bytes, not a multiple of the 3073-byte record"):
        CIFAR10(tmp_path, train=False)


def test_synthetic_is_seeded_and_learnable():
    a = Synthetic(n=600, shape=(8,), num_classes=3, seed=7, noise=0.5)
    b = Synthetic(n=600, shape=(8,), num_classes=3, seed=7, noise=0.5)
    assert np.array_equal(a.data, b.data) and np.array_equal(a.targets, b.targets)
    assert not np.array_equal(a.data, Synthetic(n=600, shape=(8,), num_classes=3, seed=8).data)
    x, y = a[3]
    assert x.dtype == np.float32 and x.shape == (8,) and 0 <= y < 3
    assert set(np.unique(a.targets).tolist()) == {0, 1, 2}
    # nearest class mean, estimated on the first half, classifies the second half well
    train, test = slice(0, 300), slice(300, 600)
    means = np.stack([a.data[train][a.targets[train] == c].mean(0) for c in range(3)])
    dist = ((a.data[test][:, None, :] - means[None]) ** 2).sum(-1)
    accuracy = (dist.argmin(1) == a.targets[test]).mean()
    assert accuracy > 0.9
    batch = next(iter(DataLoader(Synthetic(n=10, shape=(1, 4, 4)), batch_size=5)))
    assert batch[0].shape == (5, 1, 4, 4) and batch[1].dtype == np.int64
