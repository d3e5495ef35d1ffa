"""Image augmentation with Pillow, as Apache SINGA 3.3's singa.image_tool.

Example::

    from singa import image_tool
    tool = image_tool.ImageTool()
    imgs = tool.load("input.png").resize_by_list([112]).crop5((96, 96), 5).enhance().flip().get()
    for i, img in enumerate(imgs):           # PIL images
        img.save("%d.png" % i)

Operations with ``inplace=True`` (the default) replace the tool's image list and return the tool,
for chaining; with ``inplace=False`` they return the new list. ``num_case`` picks how many of an
operation's variants each image yields: 1 (a random one) for training, all for testing. Random
choices use Python's ``random`` module, in the same order as SINGA, so ``random.seed`` makes a
pipeline repeatable.

Pillow is needed by this module only, and only once an image is handled: ``import singa`` and
``import singa.image_tool`` work without it.

Where SINGA has a plain bug we keep the intended behaviour (each place says so): crop3 resizes
the cropped square (SINGA resized the whole image), crop5 samples positions per image (SINGA
reused the first image's), color_cast works on current numpy (SINGA's writes to a read-only
array), and num_augmentation returns the count (SINGA's is a stub returning None).
"""
import math
import random
import types

import numpy as np

_PIL = None


def _pil():
    """Pillow's modules and constants, imported on first use: only this module needs Pillow,
    and importing it (e.g. to inspect the API) works without."""
    global _PIL
    if _PIL is None:
        try:
            from PIL import Image, ImageEnhance
        except ImportError as e:
            raise ImportError("singa.image_tool needs Pillow (pip install Pillow)") from e
        resampling = getattr(Image, "Resampling", Image)   # Pillow >= 9.1 has the enums
        transpose = getattr(Image, "Transpose", Image)
        _PIL = types.SimpleNamespace(Image=Image, ImageEnhance=ImageEnhance,
                                     BILINEAR=resampling.BILINEAR,
                                     FLIP_LR=transpose.FLIP_LEFT_RIGHT,
                                     FLIP_TB=transpose.FLIP_TOP_BOTTOM)
    return _PIL


_CROP5_POSITIONS = ("left_top", "left_bottom", "right_top", "right_bottom", "center")
_CROP3_HORIZONTAL = ("left", "center", "right")
_CROP3_VERTICAL = ("top", "middle", "bottom")


def load_img(path, grayscale=False):
    """The image at ``path``, as 'L' when grayscale else as 'RGB' (3 channels always)."""
    img = _pil().Image.open(path)
    return img.convert("L" if grayscale else "RGB")


def crop(img, patch, position):
    """The (width, height) ``patch`` of img at ``position``: left_top, left_bottom, right_top,
    right_bottom or center."""
    w, h = img.size
    pw, ph = patch
    if w < pw or h < ph:
        raise ValueError("crop: the image (%d x %d) is smaller than the patch (%d x %d)"
                         % (w, h, pw, ph))
    corners = {"left_top": (0, 0), "left_bottom": (0, h - ph), "right_top": (w - pw, 0),
               "right_bottom": (w - pw, h - ph), "center": ((w - pw) // 2, (h - ph) // 2)}
    if position not in corners:
        raise ValueError("crop: position must be one of %s, got %r"
                         % (", ".join(_CROP5_POSITIONS), position))
    left, upper = corners[position]
    return img.crop((left, upper, left + pw, upper + ph))


def crop_and_resize(img, patch, position):
    """The largest square of img at ``position`` (left, center, right along a wide image; top,
    middle, bottom along a tall one), resized to ``patch`` (width, height).

    SINGA computes the square and then resizes the whole image instead (a plain bug)."""
    w, h = img.size
    boxes = {"left": (0, 0, h, h), "center": ((w - h) // 2, 0, (w + h) // 2, h),
             "right": (w - h, 0, w, h), "top": (0, 0, w, w),
             "middle": (0, (h - w) // 2, w, (h + w) // 2), "bottom": (0, h - w, w, h)}
    if position not in boxes:
        raise ValueError("crop_and_resize: position must be one of %s, got %r"
                         % (", ".join(_CROP3_HORIZONTAL + _CROP3_VERTICAL), position))
    return img.crop(boxes[position]).resize(tuple(patch), _pil().BILINEAR)


def resize(img, small_size):
    """img scaled (bilinear) so that its smaller side is ``small_size``."""
    w, h = img.size
    if w < h:
        new_size = (small_size, int(small_size * h / w))
    else:
        new_size = (int(small_size * w / h), small_size)
    return img.resize(new_size, _pil().BILINEAR)


def color_cast(img, offset):
    """img (as RGB) with one random value from [-offset, offset] added to each channel, each
    channel cast with probability 1/2, clipped to [0, 255]."""
    cast = [0, 0, 0]
    for i in range(3):  # SINGA's sequence of random draws
        if random.randint(0, 1):
            cast[i] = random.randint(-offset, offset)
    x = np.asarray(img.convert("RGB"), dtype=np.int16)
    y = np.clip(x + np.asarray(cast, dtype=np.int16), 0, 255).astype(np.uint8)
    return _pil().Image.fromarray(y, "RGB")


def enhance(img, scale):
    """img with Color, Contrast, Brightness and Sharpness each changed, with probability 1/2,
    by a random factor from [1 - scale, 1 + scale]."""
    factors = [1.0, 1.0, 1.0, 1.0]
    for i in range(4):
        if random.randint(0, 1):
            factors[i] = random.uniform(1 - scale, 1 + scale)
    e = _pil().ImageEnhance
    for enhancer, f in zip((e.Color, e.Contrast, e.Brightness, e.Sharpness), factors):
        if f != 1.0:
            img = enhancer(img).enhance(f)
    return img


def flip(img):
    """img mirrored left to right."""
    return img.transpose(_pil().FLIP_LR)


def flip_down(img):
    """img mirrored top to bottom."""
    return img.transpose(_pil().FLIP_TB)


def get_list_sample(l, sample_size):
    """``sample_size`` distinct random items of l, in l's order."""
    return [l[i] for i in sorted(random.sample(range(len(l)), sample_size))]


def _check_cases(op, num_case, most):
    if not isinstance(num_case, int) or not 1 <= num_case <= most:
        raise ValueError("%s: num_case must be in [1, %d], got %r" % (op, most, num_case))


class ImageTool(object):
    """A list of PIL images and chainable augmentations (see the module docstring)."""

    def __init__(self):
        self.imgs = []
        self._cases = 1  # variants made from each loaded image so far (num_augmentation)

    def _done(self, new_imgs, inplace, cases):
        if inplace:
            self.imgs = new_imgs
            self._cases *= cases
            return self
        return new_imgs

    def load(self, path, grayscale=False):
        """Loads one image file as the tool's only image."""
        self.imgs = [load_img(path, grayscale)]
        self._cases = 1
        return self

    def set(self, imgs):
        """Replaces the image list with ``imgs`` (PIL images); returns the tool."""
        self.imgs = imgs
        self._cases = 1
        return self

    def append(self, img):
        """Adds one PIL image to the list; returns the tool."""
        self.imgs.append(img)
        return self

    def get(self):
        """The current list of PIL images."""
        return self.imgs

    def num_augmentation(self):
        """How many images the in-place operations since load()/set() made from each image
        (SINGA declares this and returns None)."""
        return self._cases

    def resize_by_range(self, rng, inplace=True):
        """Resizes each image so that its smaller side is a random size in [rng[0], rng[1])."""
        return self.resize_by_list(list(range(rng[0], rng[1])), 1, inplace)

    def resize_by_list(self, size_list, num_case=1, inplace=True):
        """Each image resized (smaller side) to ``num_case`` sizes of size_list (all of them, in
        order, when num_case == len(size_list); a random sample otherwise)."""
        _check_cases("resize_by_list", num_case, len(size_list))
        new_imgs = []
        for img in self.imgs:
            sizes = size_list if num_case == len(size_list) else get_list_sample(size_list,
                                                                                 num_case)
            new_imgs.extend(resize(img, s) for s in sizes)
        return self._done(new_imgs, inplace, num_case)

    def rotate_by_range(self, rng, inplace=True):
        """Rotates each image by a random whole angle (degrees) in [rng[0], rng[1])."""
        return self.rotate_by_list(list(range(rng[0], rng[1])), 1, inplace)

    def rotate_by_list(self, angle_list, num_case=1, inplace=True):
        """Each image rotated (counter-clockwise, same size, PIL's defaults) by ``num_case``
        angles of angle_list."""
        _check_cases("rotate_by_list", num_case, len(angle_list))
        new_imgs = []
        for img in self.imgs:
            angles = angle_list if num_case == len(angle_list) else get_list_sample(angle_list,
                                                                                    num_case)
            new_imgs.extend(img.rotate(a) for a in angles)
        return self._done(new_imgs, inplace, num_case)

    def crop5(self, patch, num_case=1, inplace=True):
        """Each image cropped to ``patch`` (width, height) at num_case of: left_top, left_bottom,
        right_top, right_bottom, center (all five, in that order, for num_case=5).

        SINGA samples the positions once and reuses them for every later image."""
        _check_cases("crop5", num_case, 5)
        new_imgs = []
        for img in self.imgs:
            positions = (_CROP5_POSITIONS if num_case == 5
                         else get_list_sample(_CROP5_POSITIONS, num_case))
            new_imgs.extend(crop(img, patch, p) for p in positions)
        return self._done(new_imgs, inplace, num_case)

    def crop3(self, patch, num_case=1, inplace=True):
        """Each image's largest square at num_case of left/center/right (a wide image) or
        top/middle/bottom (otherwise), resized to the square ``patch``."""
        if patch[0] != patch[1]:
            raise ValueError("crop3: patch must be a square, got %r" % (patch,))
        _check_cases("crop3", num_case, 3)
        new_imgs = []
        for img in self.imgs:
            choices = _CROP3_HORIZONTAL if img.size[0] > img.size[1] else _CROP3_VERTICAL
            positions = choices if num_case == 3 else get_list_sample(choices, num_case)
            new_imgs.extend(crop_and_resize(img, patch, p) for p in positions)
        return self._done(new_imgs, inplace, num_case)

    def crop8(self, patch, num_case=1, inplace=True):
        """num_case of the 8 crops of crop5 and crop3 together: the crop5 ones (of every
        image) first, then the crop3 ones."""
        _check_cases("crop8", num_case, 8)
        if num_case == 8:
            count = 5
        else:
            count = sum(1 for s in get_list_sample(list(range(8)), num_case) if s < 5)
        new_imgs = []
        if count > 0:
            new_imgs += self.crop5(patch, count, False)
        if num_case - count > 0:
            new_imgs += self.crop3(patch, num_case - count, False)
        return self._done(new_imgs, inplace, num_case)

    def random_crop(self, patch, inplace=True):
        """Each image cropped to ``patch`` (width, height) at a random offset."""
        new_imgs = []
        for img in self.imgs:
            w, h = img.size
            if w < patch[0] or h < patch[1]:
                raise ValueError("random_crop: img size (%d, %d), patch size (%d, %d)"
                                 % (w, h, patch[0], patch[1]))
            left = random.randint(0, w - patch[0])
            top = random.randint(0, h - patch[1])
            new_imgs.append(img.crop((left, top, left + patch[0], top + patch[1])))
        return self._done(new_imgs, inplace, 1)

    def random_crop_resize(self, patch, inplace=True):
        """Each image cropped at a random area (8% to 100%) and aspect ratio (3/4 to 4/3), then
        resized to ``patch``; after 10 failed tries the whole image is resized."""
        new_imgs = []
        for img in self.imgs:
            w, h = img.size
            out = None
            for _ in range(10):
                area = random.uniform(0.08, 1.0) * w * h
                ratio = random.uniform(3. / 4, 4. / 3)
                cw = int(round(math.sqrt(area * ratio)))
                ch = int(round(math.sqrt(area / ratio)))
                if w > cw and h > ch:
                    left = random.randint(0, w - cw)
                    top = random.randint(0, h - ch)
                    out = img.crop((left, top, left + cw, top + ch)).resize(
                        tuple(patch), _pil().BILINEAR)
                    break
            if out is None:
                out = img.resize(tuple(patch), _pil().BILINEAR)
            new_imgs.append(out)
        return self._done(new_imgs, inplace, 1)

    def _flip_op(self, fn, num_case, inplace, op):
        if num_case not in (1, 2):
            raise ValueError("%s: num_case must be 1 or 2, got %r" % (op, num_case))
        new_imgs = []
        for img in self.imgs:
            if num_case == 2:
                new_imgs += [fn(img), img]
            else:
                new_imgs.append(fn(img) if random.randint(0, 1) else img)
        return self._done(new_imgs, inplace, num_case)

    def flip(self, num_case=1, inplace=True):
        """Each image flipped left-right with probability 1/2 (num_case=1), or both the flipped
        and the original image (num_case=2)."""
        return self._flip_op(flip, num_case, inplace, "flip")

    def flip_down(self, num_case=1, inplace=True):
        """As flip, top to bottom."""
        return self._flip_op(flip_down, num_case, inplace, "flip_down")

    def color_cast(self, offset=20, inplace=True):
        """Adds a random value from [-offset, offset] to each channel (see color_cast)."""
        if not 0 <= offset <= 255:
            raise ValueError("color_cast: offset must be in [0, 255], got %r" % (offset,))
        return self._done([color_cast(img, offset) for img in self.imgs], inplace, 1)

    def enhance(self, scale=0.2, inplace=True):
        """Random Color, Contrast, Brightness and Sharpness changes (see enhance)."""
        return self._done([enhance(img, scale) for img in self.imgs], inplace, 1)
