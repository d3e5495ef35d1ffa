"""singa.image_tool: each transform against numpy slicing or Pillow's own operation, random ones
under a fixed seed against the same draws made by hand, and ImageTool's chaining and counts."""
import random
import subprocess
import sys

import numpy as np
import pytest

Image = pytest.importorskip("PIL.Image")
ImageEnhance = pytest.importorskip("PIL.ImageEnhance")

from singa import image_tool  # noqa: E402

from child_env import child_env  # noqa: E402

BILINEAR = getattr(Image, "Resampling", Image).BILINEAR


def _rgb(h, w, seed=0):
    return np.random.default_rng(seed).integers(0, 256, size=(h, w, 3), dtype=np.uint8)


def _img(a):
    return Image.fromarray(a, "RGB")


def _a(img):
    return np.asarray(img)


def test_load_img_converts_to_rgb_or_gray(tmp_path):
    rgba = np.concatenate([_rgb(4, 5), np.full((4, 5, 1), 128, np.uint8)], axis=2)
    path = str(tmp_path / "x.png")
    Image.fromarray(rgba, "RGBA").save(path)
    img = image_tool.load_img(path)
    assert img.mode == "RGB"
    np.testing.assert_array_equal(_a(img), rgba[:, :, :3])
    gray = image_tool.load_img(path, grayscale=True)
    assert gray.mode == "L"
    np.testing.assert_array_equal(_a(gray), _a(Image.fromarray(rgba, "RGBA").convert("L")))


@pytest.mark.parametrize("position,rows,cols", [
    ("left_top", slice(0, 3), slice(0, 5)), ("left_bottom", slice(3, 6), slice(0, 5)),
    ("right_top", slice(0, 3), slice(3, 8)), ("right_bottom", slice(3, 6), slice(3, 8)),
    ("center", slice(1, 4), slice(1, 6)),
])
def test_crop_positions(position, rows, cols):
    a = _rgb(6, 8)
    np.testing.assert_array_equal(_a(image_tool.crop(_img(a), (5, 3), position)), a[rows, cols])


def test_crop_rejects_bad_requests():
    img = _img(_rgb(6, 8))
    with pytest.raises(ValueError, match="smaller than the patch"):
        image_tool.crop(img, (9, 3), "center")
    with pytest.raises(ValueError, match="position"):
        image_tool.crop(img, (2, 2), "middle")


@pytest.mark.parametrize("shape,position,rows,cols", [
    ((6, 12), "left", slice(0, 6), slice(0, 6)), ((6, 12), "center", slice(0, 6), slice(3, 9)),
    ((6, 12), "right", slice(0, 6), slice(6, 12)), ((10, 4), "top", slice(0, 4), slice(0, 4)),
    ((10, 4), "middle", slice(3, 7), slice(0, 4)), ((10, 4), "bottom", slice(6, 10), slice(0, 4)),
])
def test_crop_and_resize_resizes_the_square(shape, position, rows, cols):
    a = _rgb(*shape)
    got = _a(image_tool.crop_and_resize(_img(a), (3, 3), position))
    want = _a(_img(np.ascontiguousarray(a[rows, cols])).resize((3, 3), BILINEAR))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape,small,size", [((6, 8), 3, (4, 3)), ((9, 4), 2, (2, 4)),
                                              ((5, 5), 7, (7, 7))])
def test_resize_smaller_side(shape, small, size):
    img = _img(_rgb(*shape))
    got = image_tool.resize(img, small)
    assert got.size == size
    np.testing.assert_array_equal(_a(got), _a(img.resize(size, BILINEAR)))


def _cast_draws(offset):
    cast = [0, 0, 0]
    for i in range(3):
        if random.randint(0, 1):
            cast[i] = random.randint(-offset, offset)
    return cast


def test_color_cast_adds_clipped_offsets():
    a = _rgb(4, 6)
    a[0, 0] = (0, 0, 0)
    a[0, 1] = (255, 255, 255)
    for seed in range(50):                    # a seed that casts at least two channels
        random.seed(seed)
        cast = _cast_draws(100)
        if sum(1 for c in cast if c) >= 2:
            break
    random.seed(seed)
    got = image_tool.color_cast(_img(a), 100)
    want = np.clip(a.astype(int) + np.array(cast), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(_a(got), want)
    assert not np.array_equal(_a(got), a)


def test_enhance_applies_pillow_enhancers_in_order():
    a = _rgb(8, 8)
    random.seed(3)
    factors = [random.uniform(0.7, 1.3) if random.randint(0, 1) else 1.0 for _ in range(4)]
    want = _img(a)
    for cls, f in zip((ImageEnhance.Color, ImageEnhance.Contrast, ImageEnhance.Brightness,
                       ImageEnhance.Sharpness), factors):
        if f != 1.0:
            want = cls(want).enhance(f)
    assert any(f != 1.0 for f in factors)
    random.seed(3)
    np.testing.assert_array_equal(_a(image_tool.enhance(_img(a), 0.3)), _a(want))


def test_flips():
    a = _rgb(3, 5)
    np.testing.assert_array_equal(_a(image_tool.flip(_img(a))), a[:, ::-1])
    np.testing.assert_array_equal(_a(image_tool.flip_down(_img(a))), a[::-1])


def test_get_list_sample_keeps_list_order():
    random.seed(11)
    idx = sorted(random.sample(range(6), 3))
    random.seed(11)
    l = list("abcdef")
    assert image_tool.get_list_sample(l, 3) == [l[i] for i in idx]


# ---- ImageTool ---------------------------------------------------------------------------------
def test_chain_counts_augmentations(tmp_path):
    path = str(tmp_path / "in.png")
    _img(_rgb(12, 16)).save(path)
    tool = image_tool.ImageTool()
    imgs = tool.load(path).resize_by_list([8, 10], 2).crop5((6, 6), 5).flip(2).get()
    assert len(imgs) == 2 * 5 * 2 == tool.num_augmentation()
    assert all(img.size == (6, 6) for img in imgs)
    # order: per resized image, per crop position, (flipped, original)
    small = image_tool.resize(image_tool.load_img(path), 8)
    np.testing.assert_array_equal(_a(imgs[0]), _a(small)[:6, :6][:, ::-1])
    np.testing.assert_array_equal(_a(imgs[1]), _a(small)[:6, :6])
    np.testing.assert_array_equal(_a(imgs[3]), _a(small)[2:8, :6])      # left_bottom
    tool.set([_img(_rgb(5, 5))])
    assert tool.num_augmentation() == 1
    tool.append(_img(_rgb(5, 5, 1)))
    assert len(tool.get()) == 2


def test_not_inplace_returns_and_leaves_the_tool():
    a = _rgb(6, 6)
    tool = image_tool.ImageTool().set([_img(a)])
    out = tool.crop5((4, 4), 5, inplace=False)
    assert len(out) == 5 and tool.get()[0].size == (6, 6) and tool.num_augmentation() == 1
    np.testing.assert_array_equal(_a(out[4]), a[1:5, 1:5])


def test_rotate():
    a = _rgb(5, 5)
    tool = image_tool.ImageTool().set([_img(a)])
    np.testing.assert_array_equal(_a(tool.rotate_by_list([90], 1, inplace=False)[0]),
                                  np.rot90(a))
    np.testing.assert_array_equal(_a(tool.rotate_by_range((0, 1)).get()[0]), a)
    b = _rgb(4, 6)
    outs = image_tool.ImageTool().set([_img(b)]).rotate_by_list([0, 180], 2).get()
    np.testing.assert_array_equal(_a(outs[1]), b[::-1, ::-1])


def test_resize_by_range_draws_one_size():
    random.seed(5)
    want = image_tool.get_list_sample(list(range(6, 10)), 1)[0]
    random.seed(5)
    img = image_tool.ImageTool().set([_img(_rgb(4, 8))]).resize_by_range((6, 10)).get()[0]
    assert img.size == (2 * want, want)


def test_crop5_samples_positions_per_image():
    imgs = [_img(_rgb(6, 6, s)) for s in range(6)]
    random.seed(2)
    picks = [image_tool.get_list_sample(["left_top", "left_bottom", "right_top",
                                         "right_bottom", "center"], 2) for _ in imgs]
    random.seed(2)
    out = image_tool.ImageTool().set(imgs).crop5((3, 3), 2).get()
    want = [image_tool.crop(img, (3, 3), p) for img, ps in zip(imgs, picks) for p in ps]
    assert len(out) == 12
    for g, w in zip(out, want):
        np.testing.assert_array_equal(_a(g), _a(w))
    assert len({tuple(p) for p in picks}) > 1     # SINGA reused the first image's positions


def test_crop3_and_crop8():
    wide, tall = _img(_rgb(4, 10)), _img(_rgb(9, 3, 1))
    out = image_tool.ImageTool().set([wide, tall]).crop3((2, 2), 3).get()
    want = [image_tool.crop_and_resize(wide, (2, 2), p) for p in ("left", "center", "right")]
    want += [image_tool.crop_and_resize(tall, (2, 2), p) for p in ("top", "middle", "bottom")]
    for g, w in zip(out, want):
        np.testing.assert_array_equal(_a(g), _a(w))
    with pytest.raises(ValueError, match="square"):
        image_tool.ImageTool().set([wide]).crop3((2, 3))
    tool = image_tool.ImageTool().set([_img(_rgb(6, 8))])
    all8 = tool.crop8((4, 4), 8, inplace=False)
    want = tool.crop5((4, 4), 5, False) + tool.crop3((4, 4), 3, False)
    assert len(all8) == 8
    for g, w in zip(all8, want):
        np.testing.assert_array_equal(_a(g), _a(w))
    assert len(tool.crop8((4, 4), 3).get()) == 3 == tool.num_augmentation()


def test_random_crop_offsets():
    a = _rgb(7, 9)
    random.seed(4)
    left, top = random.randint(0, 9 - 4), random.randint(0, 7 - 3)
    random.seed(4)
    got = image_tool.ImageTool().set([_img(a)]).random_crop((4, 3)).get()[0]
    np.testing.assert_array_equal(_a(got), a[top:top + 3, left:left + 4])
    with pytest.raises(ValueError, match="patch size"):
        image_tool.ImageTool().set([_img(a)]).random_crop((10, 3))


def test_random_crop_resize():
    a = _rgb(20, 30)
    random.seed(8)
    area = random.uniform(0.08, 1.0) * 600
    ratio = random.uniform(3. / 4, 4. / 3)
    cw, ch = int(round((area * ratio) ** 0.5)), int(round((area / ratio) ** 0.5))
    assert 30 > cw and 20 > ch                     # the first try fits for this seed
    left, top = random.randint(0, 30 - cw), random.randint(0, 20 - ch)
    want = _img(np.ascontiguousarray(a[top:top + ch, left:left + cw])).resize((8, 8), BILINEAR)
    random.seed(8)
    got = image_tool.ImageTool().set([_img(a)]).random_crop_resize((8, 8)).get()[0]
    np.testing.assert_array_equal(_a(got), _a(want))


def test_flip_cases():
    a = _rgb(3, 4)
    random.seed(0)
    coins = [random.randint(0, 1) for _ in range(6)]
    random.seed(0)
    out = image_tool.ImageTool().set([_img(a)] * 6).flip().get()
    for coin, img in zip(coins, out):
        np.testing.assert_array_equal(_a(img), a[:, ::-1] if coin else a)
    assert 0 < sum(coins) < 6
    both = image_tool.ImageTool().set([_img(a)]).flip_down(2).get()
    np.testing.assert_array_equal(_a(both[0]), a[::-1])
    np.testing.assert_array_equal(_a(both[1]), a)


@pytest.mark.parametrize("call", [
    lambda t: t.flip(3), lambda t: t.flip_down(0), lambda t: t.crop5((2, 2), 6),
    lambda t: t.crop3((2, 2), 0), lambda t: t.crop8((2, 2), 9),
    lambda t: t.resize_by_list([4, 5], 3), lambda t: t.rotate_by_range((3, 3)),
    lambda t: t.color_cast(300),
])
def test_bad_cases_raise(call):
    with pytest.raises(ValueError):
        call(image_tool.ImageTool().set([_img(_rgb(6, 6))]))


def test_import_singa_needs_no_pillow(tmp_path):
    code = ("import sys; sys.modules['PIL'] = None\n"
            "import singa, singa.tensor, singa.utils, singa.data, singa.snapshot\n"
            "from singa import image_tool\n"
            "tool = image_tool.ImageTool()\n"
            "try:\n    image_tool.load_img('x.png')\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "singa.image_tool needs Pillow" in out.stdout
