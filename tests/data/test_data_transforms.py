"""funcgrad.data.transforms against hand-computed NumPy (and torch, when it is installed)."""
import numpy as np
import pytest

from funcgrad.data import transforms as T
from funcgrad.data._worker import _RngScope


def test_to_array_layouts_and_scaling():
    hwc = np.array([[[0, 255, 51]]], dtype=np.uint8)            # (1, 1, 3)
    out = T.ToArray()(hwc)
    assert out.shape == (3, 1, 1) and out.dtype == np.float32
    assert out.ravel().tolist() == pytest.approx([0.0, 1.0, 0.2])
    gray = T.ToArray()(np.array([[0, 255]], np.uint8))
    assert gray.shape == (1, 1, 2) and gray.ravel().tolist() == [0.0, 1.0]
    chw = T.ToArray(input_layout="CHW")(np.zeros((3, 4, 5), np.uint8))
    assert chw.shape == (3, 4, 5)
    raw = T.ToArray(scale=False)(np.array([[7]], np.uint16))
    assert raw.ravel().tolist() == [7.0]
    u16 = T.ToArray()(np.array([[65535]], np.uint16))
    assert u16.ravel().tolist() == [1.0]
    with pytest.raises(ValueError, match=r"ToArray: expected an image of shape \(H, W\) or 3-D \(HWC\), got shape \(2,\)"):
        T.ToArray()(np.zeros(2))


def test_normalize_per_channel():
    x = np.arange(2 * 2 * 2, dtype=np.float32).reshape(2, 2, 2)
    out = T.Normalize([1.0, 2.0], [2.0, 0.5])(x)
    expected = np.stack([(x[0] - 1.0) / 2.0, (x[1] - 2.0) / 0.5])
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    assert out.dtype == np.float32
    assert x[0, 0, 0] == 0.0                                       # input untouched
    last = T.Normalize([1.0, 2.0], [2.0, 0.5], channels_last=True)(x.transpose(1, 2, 0))
    np.testing.assert_allclose(last, expected.transpose(1, 2, 0), rtol=1e-6)
    ints = T.Normalize([10], [5])(np.array([[20, 0]], np.uint8))
    assert ints.dtype == np.float32 and ints.tolist() == [[2.0, -2.0]]
    f64 = T.Normalize([0.5], [0.5])(np.ones((1, 2, 2)))
    assert f64.dtype == np.float64 and f64.ravel().tolist() == [1.0] * 4
    with pytest.raises(ValueError, match=r"Normalize: image of shape \(3, 2, 2\) has 3 channels but mean/std have 2"):
        T.Normalize([0, 0], [1, 1])(np.zeros((3, 2, 2)))
    with pytest.raises(ValueError, match="std must not contain zeros"):
        T.Normalize([0], [0])


def test_random_crop_is_a_window_of_the_padded_image():
    x = np.arange(3 * 5 * 6, dtype=np.int32).reshape(3, 5, 6)
    crop = T.RandomCrop((4, 4), padding=2, seed=5)
    out = crop(x)
    assert out.shape == (3, 4, 4)
    # replay the generator: offsets are drawn row first, then column
    rng = np.random.default_rng(5)
    i, j = int(rng.integers(0, 9 - 4 + 1)), int(rng.integers(0, 10 - 4 + 1))
    padded = np.pad(x, ((0, 0), (2, 2), (2, 2)))
    np.testing.assert_array_equal(out, padded[:, i:i + 4, j:j + 4])


def test_random_crop_padding_modes_and_errors():
    x = np.array([[1, 2], [3, 4]])
    full = T.RandomCrop(4, padding=1, padding_mode="edge", seed=0)(x)
    assert full.tolist() == [[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]]
    filled = T.RandomCrop(4, padding=1, fill=9, seed=0)(x)
    assert filled.tolist() == [[9, 9, 9, 9], [9, 1, 2, 9], [9, 3, 4, 9], [9, 9, 9, 9]]
    asym = T.RandomCrop((2, 5), padding=(1, 0, 2, 0), seed=0)(x)      # left, top, right, bottom
    assert asym.tolist() == [[0, 1, 2, 0, 0], [0, 3, 4, 0, 0]]
    grown = T.RandomCrop(3, pad_if_needed=True, seed=0)(x)
    assert grown.shape == (3, 3)
    hwc = T.RandomCrop(2, channels_last=True, seed=0)(np.zeros((4, 4, 3)))
    assert hwc.shape == (2, 2, 3)
    with pytest.raises(ValueError, match=r"RandomCrop: crop size \(3, 3\) is larger than the \(padded\) image \(2, 2\)"):
        T.RandomCrop(3)(x)


def test_random_transforms_use_the_loader_generator_without_a_seed():
    x = np.arange(64, dtype=np.float32).reshape(1, 8, 8)
    t = T.Compose([T.RandomCrop(6, padding=1), T.RandomHorizontalFlip()])
    with _RngScope([1, 2, 3]):
        a = t(x)
    with _RngScope([1, 2, 3]):
        b = t(x)
    with _RngScope([1, 2, 4]):
        c = [t(x) for _ in range(4)]
    np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, cc) for cc in c)


def test_horizontal_flip():
    x = np.array([[[1, 2, 3], [4, 5, 6]]])
    assert T.RandomHorizontalFlip(p=1.0)(x).tolist() == [[[3, 2, 1], [6, 5, 4]]]
    assert T.RandomHorizontalFlip(p=0.0)(x).tolist() == x.tolist()
    hwc = np.arange(12).reshape(2, 2, 3)
    np.testing.assert_array_equal(T.RandomHorizontalFlip(1.0, channels_last=True)(hwc), hwc[:, ::-1, :])
    flips = [T.RandomHorizontalFlip(seed=np.random.default_rng(0))(x)[0, 0, 0] == 3 for _ in range(1)]
    assert flips == [np.random.default_rng(0).random() < 0.5]
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\], got 2"):
        T.RandomHorizontalFlip(p=2)


def test_center_crop():
    x = np.arange(25).reshape(5, 5)
    assert T.CenterCrop(3)(x).tolist() == [[6, 7, 8], [11, 12, 13], [16, 17, 18]]


def test_resize_nearest_by_hand():
    x = np.arange(16).reshape(4, 4)
    # 4 -> 2: source pixels floor((i + 0.5) * 2) = 1, 3
    assert T.Resize((2, 2), "nearest")(x).tolist() == [[5, 7], [13, 15]]
    up = T.Resize((4, 4), "nearest")(np.array([[1, 2], [3, 4]]))
    assert up.tolist() == [[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]]
    # 3 -> 2: centres at 0.75 and 2.25 -> source pixels 0 and 2
    assert T.Resize((1, 2), "nearest")(np.array([[5, 6, 7]])).tolist() == [[5, 7]]


def test_resize_bilinear_by_hand():
    x = np.array([[0.0, 10.0]], np.float32)
    out = T.Resize((1, 4))(x)
    # output centres map to source 0.25*... : x_src = (i + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25
    assert out.ravel().tolist() == pytest.approx([0.0, 2.5, 7.5, 10.0])
    down = T.Resize((1, 1))(np.array([[0.0, 4.0], [8.0, 12.0]], np.float32))
    assert down.ravel().tolist() == pytest.approx([6.0])
    u8 = T.Resize((1, 4))(np.array([[0, 11]], np.uint8))
    assert u8.dtype == np.uint8 and u8.ravel().tolist() == [0, 3, 8, 11]   # 2.75 -> 3, 8.25 -> 8


def test_resize_shorter_side_and_layouts():
    assert T.Resize(4)(np.zeros((3, 8, 16), np.float32)).shape == (3, 4, 8)
    assert T.Resize(4)(np.zeros((10, 5))).shape == (8, 4)
    assert T.Resize((3, 5), channels_last=True)(np.zeros((6, 10, 3))).shape == (3, 5, 3)
    with pytest.raises(ValueError, match="interpolation must be 'bilinear' or 'nearest'"):
        T.Resize(3, interpolation="cubic")


@pytest.mark.parametrize("size", [(5, 7), (16, 3), (8, 8)])
def test_resize_matches_torch(size):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    x = np.random.default_rng(0).standard_normal((2, 3, 9, 6)).astype(np.float32)
    ours = T.Resize(size)(x)
    ref = F.interpolate(torch.from_numpy(x), size=size, mode="bilinear", align_corners=False,
                        antialias=False).numpy()
    np.testing.assert_allclose(ours, ref, atol=1e-5)
    ours_n = T.Resize(size, "nearest")(x)
    ref_n = F.interpolate(torch.from_numpy(x), size=size, mode="nearest-exact").numpy()
    np.testing.assert_array_equal(ours_n, ref_n)


def test_lambda_and_compose():
    t = T.Compose([T.Lambda(lambda v: v + 1), T.Lambda(np.negative)])
    assert t(np.array([1, 2])).tolist() == [-2, -3]
    assert "Lambda" in repr(t)
    with pytest.raises(TypeError, match="Lambda: expected a callable"):
        T.Lambda(3)


def test_seed_argument_errors():
    with pytest.raises(TypeError, match="RandomCrop: seed must be None, an int or a numpy.random.Generator"):
        T.RandomCrop(2, seed="abc")
