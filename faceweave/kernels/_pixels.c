/*
 * faceweave.kernels._pixels: per-pixel chains of the video's paste-back,
 * fused into one pass over the pixels, compiled when faceweave is installed.
 *
 * Each function takes contiguous buffers (NumPy arrays) and their sizes,
 * checks every size before the loop and runs the loop with the interpreter
 * lock released.  The reference formulations, which give the same values to
 * the bit, are in faceweave/kernels/reference.py; the tests compare the two.
 * Built with -ffp-contract=off: no fused multiply-add, so float32 arithmetic
 * rounds where NumPy's does (and -fno-math-errno, which lets lrint and lrintf
 * be one instruction: the same values, no errno), and -fno-wrapv: the
 * interpreter's CFLAGS ask for wrapping signed arithmetic, which no loop here
 * relies on (every index and fixed-point position is bounded by the sizes
 * checked before it) and which keeps the compiler from simplifying the loops'
 * index arithmetic (shade_face, warp_by_grid and detail_grain run 9-13 %
 * faster without it, with the same values).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* AVX2 where the processor has it (chosen at load time), the baseline
 * elsewhere: the loops below are element by element with no fused
 * multiply-add, so both give the same values */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define WIDE_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define WIDE_CLONES
#endif

/* a level rounded from value + 0.5 as put_detail does: truncated, 0 below
 * (and for NaN), 255 above */
static inline uint8_t level_of(float value) {
    value = value + 0.5f;
    value = value > 0.0f ? value : 0.0f;
    value = value < 255.0f ? value : 255.0f;
    return (uint8_t)(int)value;
}

/* one row of put_detail: o = level(v + 0.5), v = new (sign 0), new + (src -
 * low) * each (sign 1) or new - (src - low) * each (sign -1); the level
 * truncated, 0 below (and for NaN), 255 at and above 255 */
WIDE_CLONES
static void detail_row(uint8_t *restrict o, const float *restrict n, const float *restrict s,
                       const float *restrict l, const float *restrict each, Py_ssize_t count, int sign) {
    if (sign > 0)
        for (Py_ssize_t k = 0; k < count; k++)
            o[k] = level_of(n[k] + (s[k] - l[k]) * each[k]);
    else if (sign < 0)
        for (Py_ssize_t k = 0; k < count; k++)
            o[k] = level_of(n[k] - (s[k] - l[k]) * each[k]);
    else
        for (Py_ssize_t k = 0; k < count; k++)
            o[k] = level_of(n[k]);
}

/* put_detail(new, src, low, mask, out, width, height, channels, frame_width,
 *            x0, y0, step, sign)
 *   new        float32 (height, width, channels): the new face's window
 *   src, low   float32 (height, width, channels): the picture whose detail
 *              band (src - low) is moved, and its low-pass
 *   mask       float32 (height, width); with the band only
 *   out        uint8 frame (rows of frame_width * channels), written in the
 *              window whose first pixel is (x0, y0):
 *              clip(new + sign * ((src - low) * (step * mask)) + 0.5, 0, 255),
 *              truncated (NaN: 0); sign 0 leaves the band out (new + 0.5, clipped)
 */
static PyObject *put_detail(PyObject *self, PyObject *args) {
    Py_buffer new_b, src_b, low_b, mask_b, out_b;
    int width, height, channels, frame_width, x0, y0, sign;
    float step;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*iiiiiifi", &new_b, &src_b, &low_b, &mask_b, &out_b, &width, &height,
                          &channels, &frame_width, &x0, &y0, &step, &sign))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t pixels = (Py_ssize_t)width * height, values = pixels * channels;
    Py_ssize_t fsize = sizeof(float);
    if (width <= 0 || height <= 0 || channels <= 0 || x0 < 0 || y0 < 0 || x0 + width > frame_width) {
        PyErr_SetString(PyExc_ValueError, "the window must lie inside the frame's width");
        goto done;
    }
    if (new_b.len != values * fsize
        || (sign != 0
            && (mask_b.len != pixels * fsize || src_b.len != values * fsize || low_b.len != values * fsize))) {
        PyErr_Format(PyExc_ValueError, "new, src and low must hold %d x %d x %d float32 values, mask %d x %d", height,
                     width, channels, height, width);
        goto done;
    }
    Py_ssize_t row = (Py_ssize_t)frame_width * channels;
    if (out_b.len % row || out_b.len / row < (Py_ssize_t)y0 + height) {
        PyErr_SetString(PyExc_ValueError, "the window must lie inside the frame's height");
        goto done;
    }
    const float *n = (const float *)new_b.buf, *s = (const float *)src_b.buf, *l = (const float *)low_b.buf;
    const float *m = (const float *)mask_b.buf;
    uint8_t *o = (uint8_t *)out_b.buf;
    float *each = NULL;
    if (sign != 0 && (each = PyMem_RawMalloc((size_t)width * channels * sizeof(float))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t values = (Py_ssize_t)width * channels;
    for (int j = 0; j < height; j++) {
        uint8_t *line = o + (Py_ssize_t)(y0 + j) * row + (Py_ssize_t)x0 * channels;
        Py_ssize_t first = (Py_ssize_t)j * values;
        if (sign != 0)
            for (int i = 0; i < width; i++) { /* the step under the mask, per value */
                float w = step * m[(Py_ssize_t)j * width + i];
                for (int c = 0; c < channels; c++)
                    each[(Py_ssize_t)i * channels + c] = w;
            }
        detail_row(line, n + first, s + first, l + first, each, values, sign);
    }
    Py_END_ALLOW_THREADS
    PyMem_RawFree(each);
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&new_b);
    PyBuffer_Release(&src_b);
    PyBuffer_Release(&low_b);
    PyBuffer_Release(&mask_b);
    PyBuffer_Release(&out_b);
    return result;
}

/* OpenCV's warpAffine (INTER_LINEAR): coordinates in 1/32 pixel from a
 * 10-bit fixed-point walk along the row, bilinear weights in 1/32 steps */
#define AB_SCALE 1024
#define TAB 32

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* the crop's channel c at (sx, sy) + its 2x2 neighbours, replicated at the
 * window's edges, weighted in 15-bit fixed point and rounded (uint8) */
static inline int sample_u8(const uint8_t *crop, Py_ssize_t stride, int ch, int c, int sx, int sy, int fx, int fy,
                            int w, int h) {
    int x0 = clampi(sx, 0, w - 1), x1 = clampi(sx + 1, 0, w - 1);
    int y0 = clampi(sy, 0, h - 1), y1 = clampi(sy + 1, 0, h - 1);
    int w00 = (TAB - fy) * (TAB - fx) * 32, w01 = (TAB - fy) * fx * 32, w10 = fy * (TAB - fx) * 32,
        w11 = fy * fx * 32;
    int v = crop[y0 * stride + x0 * ch + c] * w00 + crop[y0 * stride + x1 * ch + c] * w01
            + crop[y1 * stride + x0 * ch + c] * w10 + crop[y1 * stride + x1 * ch + c] * w11;
    return clampi((v + (1 << 14)) >> 15, 0, 255);
}

/* the mask at (sx, sy), 0 outside the window, float weights */
static inline float sample_f32(const float *mask, Py_ssize_t stride, int sx, int sy, int fx, int fy, int w, int h) {
    if (sx >= w || sx + 1 < 0 || sy >= h || sy + 1 < 0)
        return 0.0f;
    float ax = (float)fx * (1.0f / TAB), ay = (float)fy * (1.0f / TAB);
    float vx0 = 1.0f - ax, vy0 = 1.0f - ay;
    float w00 = vy0 * vx0, w01 = vy0 * ax, w10 = ay * vx0, w11 = ay * ax;
    int in_x0 = sx >= 0, in_x1 = sx + 1 < w, in_y0 = sy >= 0, in_y1 = sy + 1 < h;
    float v00 = in_x0 && in_y0 ? mask[sy * stride + sx] : 0.0f;
    float v01 = in_x1 && in_y0 ? mask[sy * stride + sx + 1] : 0.0f;
    float v10 = in_x0 && in_y1 ? mask[(sy + 1) * stride + sx] : 0.0f;
    float v11 = in_x1 && in_y1 ? mask[(sy + 1) * stride + sx + 1] : 0.0f;
    return v00 * w00 + v01 * w01 + v10 * w10 + v11 * w11;
}

/* a (2, 3) affine matrix inverted in place, as cv2.warpAffine inverts
 * the matrix it is given (a singular one becomes all zeros) */
static void invert_affine(double *m) {
    double d = m[0] * m[4] - m[1] * m[3];
    d = d != 0 ? 1. / d : 0;
    double a11 = m[4] * d, a22 = m[0] * d;
    m[0] = a11;
    m[1] *= -d;
    m[3] *= -d;
    m[4] = a22;
    double b1 = -m[0] * m[2] - m[1] * m[5], b2 = -m[3] * m[2] - m[4] * m[5];
    m[2] = b1;
    m[5] = b2;
}

/* the bilinear weights of each 1/32-pixel position (fy * TAB + fx): the
 * crop's in 15-bit fixed point, the mask's in float, as warpAffine's */
static int iweights[4 * TAB * TAB];
static float weights[4 * TAB * TAB];

static void fill_weights(void) {
    for (int fy = 0; fy < TAB; fy++)
        for (int fx = 0; fx < TAB; fx++) {
            int k = 4 * (fy * TAB + fx);
            iweights[k] = (TAB - fy) * (TAB - fx) * 32;
            iweights[k + 1] = (TAB - fy) * fx * 32;
            iweights[k + 2] = fy * (TAB - fx) * 32;
            iweights[k + 3] = fy * fx * 32;
            float ax = (float)fx * (1.0f / TAB), ay = (float)fy * (1.0f / TAB);
            float vx0 = 1.0f - ax, vy0 = 1.0f - ay;
            weights[k] = vy0 * vx0;
            weights[k + 1] = vy0 * ax;
            weights[k + 2] = ay * vx0;
            weights[k + 3] = ay * ax;
        }
}

/* the mask's bilinear sample at an inner cell (p: its top-left value), its
 * four values weighted by warpAffine's float weights f, in warpAffine's order */
static inline float inner_sample(const float *p, Py_ssize_t stride, const float *f) {
    return p[0] * f[0] + p[1] * f[1] + p[stride] * f[2] + p[stride + 1] * f[3];
}

/* for any matrix: the steps along a row, as warpAffine's adelta and bdelta
 * (2 * width ints) */
static void row_steps(int *delta, const double *m, int width) {
    for (int i = 0; i < width; i++) {
        delta[2 * i] = (int)lrint(m[0] * i * AB_SCALE);
        delta[2 * i + 1] = (int)lrint(m[3] * i * AB_SCALE);
    }
}

/* for a matrix that scales and shifts only (m[1] == m[3] == 0): each
 * column's position in 1/32 pixel as warpAffine's walk gives it (m[1] * j +
 * m[2] is m[2]), its pixel and fraction into cols (2 * width ints) */
static void upright_columns(int *cols, const double *m, int width) {
    int X0 = (int)lrint(m[2] * AB_SCALE) + AB_SCALE / TAB / 2;
    for (int i = 0; i < width; i++) {
        int X = (X0 + (int)lrint(m[0] * i * AB_SCALE)) >> 5;
        cols[2 * i] = X >> 5;
        cols[2 * i + 1] = X & (TAB - 1);
    }
}

/* and row j's position in 1/32 pixel (m[3] * i is 0) */
static inline int upright_row(const double *m, int j) {
    return ((int)lrint((m[4] * j + m[5]) * AB_SCALE) + AB_SCALE / TAB / 2) >> 5;
}

/* one pixel of the window inside its edges, blended into o by the mask's wm
 * (not 0): the crop's 2x2 neighbours q weighted by w, rounded, then
 * (level * wm + o * (1 - wm)) / (wm + (1 - wm) + 1e-5) rounded, as blendLinear */
static inline void blend_pixel(uint8_t *o, const uint8_t *q, Py_ssize_t cstride, int ch, const int *w, float wm) {
    float wf = 1.0f - wm, den = wm + wf + 1e-5f;
    for (int c = 0; c < ch; c++) {
        int v = q[c] * w[0] + q[ch + c] * w[1] + q[cstride + c] * w[2] + q[cstride + ch + c] * w[3];
        int level = (v + (1 << 14)) >> 15; /* 0..255: the weights sum to 1 << 15 */
        if (wm == 1.0f) { /* level / (1 + 1e-5) rounds to level for every level */
            o[c] = (uint8_t)level;
            continue;
        }
        float num = (float)level * wm + (float)o[c] * wf;
        o[c] = (uint8_t)clampi((int)lrintf(num / den), 0, 255);
    }
}

/* blend_pixel for three channels */
static inline void blend_pixel3(uint8_t *o, const uint8_t *q, Py_ssize_t cstride, const int *w, float wm) {
    const uint8_t *r = q + cstride;
    int l0 = (q[0] * w[0] + q[3] * w[1] + r[0] * w[2] + r[3] * w[3] + (1 << 14)) >> 15;
    int l1 = (q[1] * w[0] + q[4] * w[1] + r[1] * w[2] + r[4] * w[3] + (1 << 14)) >> 15;
    int l2 = (q[2] * w[0] + q[5] * w[1] + r[2] * w[2] + r[5] * w[3] + (1 << 14)) >> 15;
    if (wm == 1.0f) {
        o[0] = (uint8_t)l0;
        o[1] = (uint8_t)l1;
        o[2] = (uint8_t)l2;
        return;
    }
    float wf = 1.0f - wm, den = wm + wf + 1e-5f;
    o[0] = (uint8_t)clampi((int)lrintf(((float)l0 * wm + (float)o[0] * wf) / den), 0, 255);
    o[1] = (uint8_t)clampi((int)lrintf(((float)l1 * wm + (float)o[1] * wf) / den), 0, 255);
    o[2] = (uint8_t)clampi((int)lrintf(((float)l2 * wm + (float)o[2] * wf) / den), 0, 255);
}

/* each 2x2 cell of the window's mask (cell (x, y): its pixels x..x+1, y..y+1,
 * for x < w - 1, y < h - 1): CELL_OUT where the four are 0 (a bilinear sample
 * there is 0), CELL_IN where they are 1 (a sample is exactly 1: the
 * weights are multiples of 1/1024 that sum to 1), CELL_EDGE otherwise */
enum { CELL_OUT = 0, CELL_IN = 1, CELL_EDGE = 2 };

static void mask_cells(uint8_t *cells, const float *mask, Py_ssize_t stride, int w, int h) {
    for (int y = 0; y + 1 < h; y++) {
        const float *a = mask + (Py_ssize_t)y * stride, *b = a + stride;
        uint8_t *row = cells + (Py_ssize_t)y * w;
        for (int x = 0; x + 1 < w; x++) {
            float p = a[x], q = a[x + 1], r = b[x], t = b[x + 1];
            int zero = (p == 0.0f) & (q == 0.0f) & (r == 0.0f) & (t == 0.0f);
            int one = (p == 1.0f) & (q == 1.0f) & (r == 1.0f) & (t == 1.0f);
            row[x] = (uint8_t)(zero ? CELL_OUT : (one ? CELL_IN : CELL_EDGE));
        }
    }
}

/* one row of two source rows mixed at fy, in 1/32 steps: v = (32 - fy) * a + fy * b
 * (at most 32 * 255, exact in 16 bits) */
WIDE_CLONES
static void mix_rows(uint16_t *restrict v, const uint8_t *restrict a, const uint8_t *restrict b, Py_ssize_t n,
                     int fy) {
    uint16_t ay = (uint16_t)(TAB - fy), by = (uint16_t)fy;
    for (Py_ssize_t q = 0; q < n; q++)
        v[q] = (uint16_t)(ay * a[q] + by * b[q]);
}

/* the crop's window, its mask and the mask's cells, as paste_warped reads them */
typedef struct {
    const uint8_t *crop;
    const float *mask;
    const uint8_t *cells;
    Py_ssize_t cstride, mstride;
    int ch, bw, bh;
} Warp;

/* a pixel whose 2x2 neighbours reach past the window's edges: the crop's
 * replicated, the mask's 0 there, blended into o as blendLinear */
static void paste_edge(const Warp *p, uint8_t *o, int sx, int sy, int fx, int fy) {
    float wm = sample_f32(p->mask, p->mstride, sx, sy, fx, fy, p->bw, p->bh);
    if (wm == 0.0f)
        return;
    float wf = 1.0f - wm, den = wm + wf + 1e-5f;
    for (int c = 0; c < p->ch; c++) {
        float level = (float)sample_u8(p->crop, p->cstride, p->ch, c, sx, sy, fx, fy, p->bw, p->bh);
        o[c] = (uint8_t)clampi((int)lrintf((level * wm + (float)o[c] * wf) / den), 0, 255);
    }
}

/* the mask's sample in an interior cell of the kind given (not CELL_OUT):
 * exactly 1 in a cell of ones, else bilinear in warpAffine's float weights */
static inline float cell_weight(const Warp *p, int kind, int sx, int sy, int fx, int fy) {
    if (kind == CELL_IN)
        return 1.0f;
    return inner_sample(p->mask + (Py_ssize_t)sy * p->mstride + sx, p->mstride, weights + 4 * (fy * TAB + fx));
}

/* the general walk (a matrix that turns): each pixel's position in 1/32
 * pixel from warpAffine's fixed-point steps along the row */
static void paste_turned(const Warp *p, uint8_t *out, int fw, int x1, int y1, int width, int height, const double *m,
                         int *delta) {
    int ch = p->ch, bw = p->bw, bh = p->bh;
    row_steps(delta, m, width);
    for (int j = 0; j < height; j++) {
        int X0 = (int)lrint((m[1] * j + m[2]) * AB_SCALE) + AB_SCALE / TAB / 2;
        int Y0 = (int)lrint((m[4] * j + m[5]) * AB_SCALE) + AB_SCALE / TAB / 2;
        uint8_t *line = out + ((Py_ssize_t)(y1 + j) * fw + x1) * ch;
        for (int i = 0; i < width; i++) {
            int X = (X0 + delta[2 * i]) >> 5, Y = (Y0 + delta[2 * i + 1]) >> 5;
            int sx = X >> 5, sy = Y >> 5, fx = X & (TAB - 1), fy = Y & (TAB - 1);
            uint8_t *o = line + (Py_ssize_t)i * ch;
            if (sx < 0 || sy < 0 || sx >= bw - 1 || sy >= bh - 1) {
                paste_edge(p, o, sx, sy, fx, fy);
                continue;
            }
            int kind = p->cells[(Py_ssize_t)sy * bw + sx];
            if (kind == CELL_OUT)
                continue; /* blendLinear keeps the frame's level there */
            float wm = cell_weight(p, kind, sx, sy, fx, fy);
            if (wm == 0.0f)
                continue;
            const uint8_t *q = p->crop + (Py_ssize_t)sy * p->cstride + (Py_ssize_t)sx * ch;
            const int *w = iweights + 4 * (fy * TAB + fx);
            if (ch == 3)
                blend_pixel3(o, q, p->cstride, w, wm);
            else
                blend_pixel(o, q, p->cstride, ch, w, wm);
        }
    }
}

/* (level * wm + o * (1 - wm)) / (wm + (1 - wm) + 1e-5) rounded, as
 * blendLinear; the level itself where wm is 1 (it rounds to it) */
static inline uint8_t blended(int level, uint8_t o, float wm, float wf, float den) {
    if (wm == 1.0f)
        return (uint8_t)level;
    return (uint8_t)clampi((int)lrintf(((float)level * wm + (float)o * wf) / den), 0, 255);
}

/* the walk for a matrix that scales and shifts only (m[1] == m[3] == 0, the
 * working crop's): warpAffine's x position then depends on the column
 * alone and its y position on the row alone, so each row first mixes the
 * crop's two rows at its fy (vrow, (32 - fy) * a + fy * b) and each pixel
 * then mixes two of those at its fx:
 * ((32 - fx) * v0 + fx * v1 + 512) >> 10, the 15-bit rounding of the 2x2
 * weights (32 * (32 - fy) * (32 - fx) ...) in integers, the same level */
static void paste_upright(const Warp *p, uint8_t *out, int fw, int x1, int y1, int width, int height,
                          const double *m, int *cols, uint16_t *vrow) {
    int ch = p->ch, bw = p->bw, bh = p->bh;
    upright_columns(cols, m, width);
    for (int j = 0; j < height; j++) {
        int Y = upright_row(m, j), sy = Y >> 5, fy = Y & (TAB - 1);
        uint8_t *line = out + ((Py_ssize_t)(y1 + j) * fw + x1) * ch;
        if (sy < 0 || sy >= bh - 1) {
            for (int i = 0; i < width; i++)
                paste_edge(p, line + (Py_ssize_t)i * ch, cols[2 * i], sy, cols[2 * i + 1], fy);
            continue;
        }
        const uint8_t *a = p->crop + (Py_ssize_t)sy * p->cstride, *b = a + p->cstride;
        const uint8_t *cells = p->cells + (Py_ssize_t)sy * bw;
        mix_rows(vrow, a, b, (Py_ssize_t)bw * ch, fy);
        for (int i = 0; i < width; i++) {
            int sx = cols[2 * i], fx = cols[2 * i + 1];
            uint8_t *o = line + (Py_ssize_t)i * ch;
            if (sx < 0 || sx >= bw - 1) {
                paste_edge(p, o, sx, sy, fx, fy);
                continue;
            }
            int kind = cells[sx];
            if (kind == CELL_OUT)
                continue;
            float wm = cell_weight(p, kind, sx, sy, fx, fy);
            if (wm == 0.0f)
                continue;
            float wf = 1.0f - wm, den = wm + wf + 1e-5f;
            const uint16_t *v = vrow + (Py_ssize_t)sx * ch;
            int ax = TAB - fx;
            for (int c = 0; c < ch; c++)
                o[c] = blended((ax * v[c] + fx * v[ch + c] + 512) >> 10, o[c], wm, wf, den);
        }
    }
}

/* paste_warped(crop, mask, out, crop_w, crop_h, channels, bx, by, bw, bh,
 *              frame_w, frame_h, x1, y1, x2, y2, m0, m1, m2, m3, m4, m5)
 *   crop     uint8 (crop_h, crop_w, channels); its window (bx, by, bw, bh) is pasted
 *   mask     float32 (crop_h, crop_w), the same window
 *   out      uint8 (frame_h, frame_w, channels), blended in place in the box
 *            (x1, y1)-(x2, y2): what cv2.warpAffine of the window (replicated
 *            edges) and of the mask (0 outside) by m (window -> box, as given
 *            to warpAffine), then cv2.blendLinear(crop, frame, m, 1 - m) give
 */
static PyObject *paste_warped(PyObject *self, PyObject *args) {
    Py_buffer crop_b, mask_b, out_b;
    int cw, chh, ch, bx, by, bw, bh, fw, fh, x1, y1, x2, y2;
    double m[6];
    if (!PyArg_ParseTuple(args, "y*y*w*iiiiiiiiiiiiidddddd", &crop_b, &mask_b, &out_b, &cw, &chh, &ch, &bx, &by, &bw,
                          &bh, &fw, &fh, &x1, &y1, &x2, &y2, &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]))
        return NULL;
    PyObject *result = NULL;
    if (cw <= 0 || chh <= 0 || ch <= 0 || ch > 4 || crop_b.len != (Py_ssize_t)cw * chh * ch
        || mask_b.len != (Py_ssize_t)cw * chh * (Py_ssize_t)sizeof(float)
        || out_b.len != (Py_ssize_t)fw * fh * ch) {
        PyErr_SetString(PyExc_ValueError, "crop, mask and out must match their sizes and channels");
        goto done;
    }
    if (bw <= 0 || bh <= 0 || bx < 0 || by < 0 || bx + bw > cw || by + bh > chh || x1 < 0 || y1 < 0 || x2 > fw
        || y2 > fh || x2 <= x1 || y2 <= y1) {
        PyErr_SetString(PyExc_ValueError, "the window must lie in the crop and the box in the frame");
        goto done;
    }
    invert_affine(m); /* the inverse, as warpAffine makes it */
    const uint8_t *crop = (const uint8_t *)crop_b.buf + ((Py_ssize_t)by * cw + bx) * ch;
    const float *mask = (const float *)mask_b.buf + (Py_ssize_t)by * cw + bx;
    uint8_t *out = (uint8_t *)out_b.buf;
    Py_ssize_t cstride = (Py_ssize_t)cw * ch;
    int width = x2 - x1;
    int *delta = PyMem_RawMalloc(4 * (size_t)width * sizeof(int));
    uint8_t *cells = PyMem_RawMalloc((size_t)bw * bh);
    uint16_t *vrow = PyMem_RawMalloc((size_t)bw * ch * sizeof(uint16_t));
    if (delta == NULL || cells == NULL || vrow == NULL) {
        PyMem_RawFree(delta);
        PyMem_RawFree(cells);
        PyMem_RawFree(vrow);
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    mask_cells(cells, mask, cw, bw, bh);
    Warp warp = {crop, mask, cells, cstride, cw, ch, bw, bh};
    if (m[1] == 0.0 && m[3] == 0.0)
        paste_upright(&warp, out, fw, x1, y1, width, y2 - y1, m, delta, vrow);
    else
        paste_turned(&warp, out, fw, x1, y1, width, y2 - y1, m, delta);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(delta);
    PyMem_RawFree(cells);
    PyMem_RawFree(vrow);
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&crop_b);
    PyBuffer_Release(&mask_b);
    PyBuffer_Release(&out_b);
    return result;
}

/* mix_band(out, fine, coarse, mask, back, pixels, channels, add_back)
 *   out     float32 (pixels, channels): the coarser levels' sum brought up to
 *           this level (cv2.pyrUp), changed in place
 *   fine    float32 (pixels, channels): this level of the difference's pyramid
 *   coarse  float32 (pixels, channels): the next level of it brought up
 *   mask    float32 (pixels,): the mask's pyramid at this level
 *   back    float32 (pixels, channels): added last when add_back (level 0)
 *   out = out + (fine - coarse) * mask [+ back], element by element in
 *   float32, as NumPy's band = fine - coarse; band *= mask; out = out + band
 *   [; out += back] rounds
 */
WIDE_CLONES
static void mix_values(float *restrict o, const float *restrict f, const float *restrict c, const float *restrict m,
                       const float *restrict b, Py_ssize_t pixels, int ch, int add_back) {
    if (ch == 3) {
        for (Py_ssize_t p = 0; p < pixels; p++)
            for (int k = 0; k < 3; k++) {
                Py_ssize_t q = 3 * p + k;
                float v = o[q] + (f[q] - c[q]) * m[p];
                o[q] = add_back ? v + b[q] : v;
            }
        return;
    }
    for (Py_ssize_t p = 0; p < pixels; p++)
        for (int k = 0; k < ch; k++) {
            Py_ssize_t q = (Py_ssize_t)ch * p + k;
            float v = o[q] + (f[q] - c[q]) * m[p];
            o[q] = add_back ? v + b[q] : v;
        }
}

/* add_under(out, values, mask, pixels, channels, share)
 *   out    float32 (pixels, channels), changed in place
 *   values float32 (pixels, channels); mask float32 (pixels,)
 *   out += values * mask (share 1), or out += share * (values * mask):
 *   element by element in float32, NumPy's order
 */
WIDE_CLONES
static void add_values(float *restrict o, const float *restrict v, const float *restrict m, Py_ssize_t pixels, int ch,
                       float share) {
    if (ch == 3 && share == 1.0f) {
        for (Py_ssize_t p = 0; p < pixels; p++)
            for (int k = 0; k < 3; k++)
                o[3 * p + k] += v[3 * p + k] * m[p];
        return;
    }
    for (Py_ssize_t p = 0; p < pixels; p++)
        for (int k = 0; k < ch; k++) {
            Py_ssize_t q = (Py_ssize_t)ch * p + k;
            float t = v[q] * m[p];
            o[q] += share == 1.0f ? t : share * t;
        }
}

static PyObject *add_under(PyObject *self, PyObject *args) {
    Py_buffer out_b, values_b, mask_b;
    Py_ssize_t pixels;
    int ch;
    float share;
    if (!PyArg_ParseTuple(args, "w*y*y*nif", &out_b, &values_b, &mask_b, &pixels, &ch, &share))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t size = pixels * ch * (Py_ssize_t)sizeof(float);
    if (pixels <= 0 || ch <= 0 || out_b.len != size || values_b.len != size
        || mask_b.len != pixels * (Py_ssize_t)sizeof(float)) {
        PyErr_SetString(PyExc_ValueError, "out and values must hold pixels x channels float32, mask pixels");
        goto done;
    }
    float *o = (float *)out_b.buf;
    const float *v = (const float *)values_b.buf, *m = (const float *)mask_b.buf;
    Py_BEGIN_ALLOW_THREADS
    add_values(o, v, m, pixels, ch, share);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&out_b);
    PyBuffer_Release(&values_b);
    PyBuffer_Release(&mask_b);
    return result;
}

static PyObject *mix_band(PyObject *self, PyObject *args) {
    Py_buffer out_b, fine_b, coarse_b, mask_b, back_b;
    Py_ssize_t pixels;
    int ch, add_back;
    if (!PyArg_ParseTuple(args, "w*y*y*y*y*nii", &out_b, &fine_b, &coarse_b, &mask_b, &back_b, &pixels, &ch,
                          &add_back))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t values = pixels * ch, size = values * (Py_ssize_t)sizeof(float);
    if (pixels <= 0 || ch <= 0 || out_b.len != size || fine_b.len != size || coarse_b.len != size
        || mask_b.len != pixels * (Py_ssize_t)sizeof(float) || (add_back && back_b.len != size)) {
        PyErr_SetString(PyExc_ValueError, "out, fine, coarse (and back) must hold pixels x channels float32, mask pixels");
        goto done;
    }
    float *o = (float *)out_b.buf;
    const float *f = (const float *)fine_b.buf, *c = (const float *)coarse_b.buf, *m = (const float *)mask_b.buf;
    const float *b = add_back ? (const float *)back_b.buf : f;
    Py_BEGIN_ALLOW_THREADS
    mix_values(o, f, c, m, b, pixels, ch, add_back);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&out_b);
    PyBuffer_Release(&fine_b);
    PyBuffer_Release(&coarse_b);
    PyBuffer_Release(&mask_b);
    PyBuffer_Release(&back_b);
    return result;
}

/* OpenCV's borderInterpolate for BORDER_REFLECT_101 (gfedcb|abcdefgh|gfedcba) */
static inline int reflect101(int p, int len) {
    if (len == 1)
        return 0;
    while ((unsigned)p >= (unsigned)len)
        p = p < 0 ? -p : 2 * len - 2 - p;
    return p;
}

/* one row of the box's source, mirrored beyond the box's edges, as float
 * (tmp), then filtered along the row by the taps, summed tap after tap:
 * into (width * ch) floats */
WIDE_CLONES
static void filtered_row(float *restrict dst, float *restrict tmp, const uint8_t *restrict row, int width, int ch,
                         const float *restrict taps, int k) {
    int r = k / 2;
    Py_ssize_t n = (Py_ssize_t)width * ch;
    for (Py_ssize_t q = 0; q < n; q++) /* the row itself */
        tmp[(Py_ssize_t)r * ch + q] = (float)row[q];
    for (int x = -r; x < 0; x++) /* and its mirrored edges */
        for (int c = 0; c < ch; c++) {
            tmp[(Py_ssize_t)(x + r) * ch + c] = (float)row[(Py_ssize_t)reflect101(x, width) * ch + c];
            int far = reflect101(width - 1 - x, width);
            tmp[(Py_ssize_t)(width + r - 1 - x) * ch + c] = (float)row[(Py_ssize_t)far * ch + c];
        }
    if (k == 7) { /* the video's taps (sigma 0.6): one pass, one store */
        const float t0 = taps[0], t1 = taps[1], t2 = taps[2], t3 = taps[3], t4 = taps[4], t5 = taps[5], t6 = taps[6];
        const float *p0 = tmp, *p1 = tmp + ch, *p2 = tmp + 2 * ch, *p3 = tmp + 3 * ch, *p4 = tmp + 4 * ch,
                    *p5 = tmp + 5 * ch, *p6 = tmp + 6 * ch;
        for (Py_ssize_t i = 0; i < n; i++) {
            float acc = t0 * p0[i];
            acc += t1 * p1[i];
            acc += t2 * p2[i];
            acc += t3 * p3[i];
            acc += t4 * p4[i];
            acc += t5 * p5[i];
            acc += t6 * p6[i];
            dst[i] = acc;
        }
        return;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        dst[i] = taps[0] * tmp[i];
    for (int t = 1; t < k; t++) {
        const float *p = tmp + (Py_ssize_t)t * ch;
        float f = taps[t];
        for (Py_ssize_t i = 0; i < n; i++)
            dst[i] += f * p[i];
    }
}

/* one row of the grain step: low = the ring's rows (k of them, from
 * rows[0]) weighted by the taps, summed tap after tap; then
 * o = clip(o + (s - low) * each + 0.5, 0, 255), n values */
WIDE_CLONES
static void grain_row(uint8_t *restrict o, const uint8_t *restrict s, float *restrict low, const float *restrict each,
                      const float *const *rows, const float *restrict taps, int k, Py_ssize_t n) {
    if (k == 7) {
        const float t0 = taps[0], t1 = taps[1], t2 = taps[2], t3 = taps[3], t4 = taps[4], t5 = taps[5], t6 = taps[6];
        const float *restrict r0 = rows[0], *restrict r1 = rows[1], *restrict r2 = rows[2], *restrict r3 = rows[3],
                              *restrict r4 = rows[4], *restrict r5 = rows[5], *restrict r6 = rows[6];
        for (Py_ssize_t q = 0; q < n; q++) {
            float acc = t0 * r0[q];
            acc += t1 * r1[q];
            acc += t2 * r2[q];
            acc += t3 * r3[q];
            acc += t4 * r4[q];
            acc += t5 * r5[q];
            acc += t6 * r6[q];
            o[q] = level_of((float)o[q] + ((float)s[q] - acc) * each[q]);
        }
        return;
    }
    for (Py_ssize_t q = 0; q < n; q++)
        low[q] = taps[0] * rows[0][q];
    for (int t = 1; t < k; t++) {
        const float *a = rows[t];
        float f = taps[t];
        for (Py_ssize_t q = 0; q < n; q++)
            low[q] += f * a[q];
    }
    for (Py_ssize_t q = 0; q < n; q++)
        o[q] = level_of((float)o[q] + ((float)s[q] - low[q]) * each[q]);
}

/* the step under the mask per value of a row, each pixel's weight step *
 * mask (-step: o - b * w is o + b * -w exactly, as -(step * m) is -step * m)
 * for its ch values */
WIDE_CLONES
static void spread_step(float *restrict each, const float *restrict mrow, int w, int ch, float step) {
    if (ch == 3) {
        for (int i = 0; i < w; i++) {
            float wgt = step * mrow[i];
            each[3 * i] = wgt;
            each[3 * i + 1] = wgt;
            each[3 * i + 2] = wgt;
        }
        return;
    }
    for (int i = 0; i < w; i++)
        for (int c = 0; c < ch; c++)
            each[(Py_ssize_t)i * ch + c] = step * mrow[i];
}

/* where the warped mask lies: the box of its values over 0.01 (lx..hx,
 * ly..hy; hx < 0 where there is none) and how many are over 0.5 */
typedef struct {
    int lx, ly, hx, hy;
    Py_ssize_t over;
} MaskSpan;

/* a warped value v of column i noted in its row's extent: the first and
 * last columns over 0.01 and how many are over 0.5 */
static inline void note_value(float v, int i, int *first, int *last, Py_ssize_t *over) {
    if (v > 0.01f) {
        *first = *first < 0 ? i : *first;
        *last = i;
        *over += v > 0.5f;
    }
}

/* the row's warped values' extent joined into the span: the first and last
 * columns over 0.01 (first < 0: none) and how many are over 0.5 */
static void join_row(MaskSpan *span, int j, int first, int last) {
    if (first >= 0) {
        span->lx = first < span->lx ? first : span->lx;
        span->hx = last > span->hx ? last : span->hx;
        span->ly = j < span->ly ? j : span->ly;
        span->hy = j;
    }
}

/* warp_mask for a matrix that scales and shifts only (m[1] == m[3] == 0):
 * each column's x position and each row's y position as warpAffine's walk
 * gives them (see paste_upright), the same samples; cells as warp_mask's */
static MaskSpan warp_mask_upright(float *dst, int *cols, const uint8_t *cells, const float *mask, Py_ssize_t stride,
                                  int bw, int bh, const double *m, int W, int H, MaskSpan span) {
    upright_columns(cols, m, W);
    for (int j = 0; j < H; j++) {
        int Y = upright_row(m, j), sy = Y >> 5, fy = Y & (TAB - 1), inner = sy >= 0 && sy < bh - 1;
        float *line = dst + (Py_ssize_t)j * W;
        const float *a = inner ? mask + (Py_ssize_t)sy * stride : mask;
        const uint8_t *cellrow = inner ? cells + (Py_ssize_t)sy * bw : cells;
        const float *table = weights + 4 * (fy * TAB);
        int first = -1, last = -1;
        Py_ssize_t over = 0;
        for (int i = 0; i < W; i++) {
            int sx = cols[2 * i], fx = cols[2 * i + 1];
            float v;
            if (inner && sx >= 0 && sx < bw - 1) {
                if (!cellrow[sx]) {
                    line[i] = 0.0f;
                    continue;
                }
                v = inner_sample(a + sx, stride, table + 4 * fx);
            } else
                v = sample_f32(mask, stride, sx, sy, fx, fy, bw, bh);
            line[i] = v;
            note_value(v, i, &first, &last, &over);
        }
        span.over += over;
        join_row(&span, j, first, last);
    }
    return span;
}

/* the mask's window warped into the frame box (W x H floats), as
 * cv2.warpAffine (bilinear, 0 outside) with the inverted matrix m, and
 * where it lies; 2x2 cells of the window whose four values are 0 give 0
 * without sampling (cells: bw * bh bytes of scratch) */
static MaskSpan warp_mask(float *dst, int *delta, uint8_t *cells, const float *mask, Py_ssize_t stride, int bw,
                          int bh, const double *m, int W, int H) {
    MaskSpan span = {W, H, -1, -1, 0};
    for (int y = 0; y + 1 < bh; y++) {
        const float *a = mask + (Py_ssize_t)y * stride, *b = a + stride;
        for (int x = 0; x + 1 < bw; x++)
            cells[(Py_ssize_t)y * bw + x] = (a[x] != 0.0f) | (a[x + 1] != 0.0f) | (b[x] != 0.0f) | (b[x + 1] != 0.0f);
    }
    if (m[1] == 0.0 && m[3] == 0.0)
        return warp_mask_upright(dst, delta, cells, mask, stride, bw, bh, m, W, H, span);
    row_steps(delta, m, W);
    for (int j = 0; j < H; j++) {
        int X0 = (int)lrint((m[1] * j + m[2]) * AB_SCALE) + AB_SCALE / TAB / 2;
        int Y0 = (int)lrint((m[4] * j + m[5]) * AB_SCALE) + AB_SCALE / TAB / 2;
        float *line = dst + (Py_ssize_t)j * W;
        int first = -1, last = -1;
        Py_ssize_t over = 0;
        for (int i = 0; i < W; i++) {
            int X = (X0 + delta[2 * i]) >> 5, Y = (Y0 + delta[2 * i + 1]) >> 5;
            int sx = X >> 5, sy = Y >> 5, fx = X & (TAB - 1), fy = Y & (TAB - 1);
            float v;
            if (sx >= 0 && sy >= 0 && sx < bw - 1 && sy < bh - 1) {
                if (!cells[(Py_ssize_t)sy * bw + sx]) {
                    line[i] = 0.0f;
                    continue;
                }
                v = inner_sample(mask + (Py_ssize_t)sy * stride + sx, stride, weights + 4 * (fy * TAB + fx));
            } else
                v = sample_f32(mask, stride, sx, sy, fx, fy, bw, bh);
            line[i] = v;
            note_value(v, i, &first, &last, &over);
        }
        span.over += over;
        join_row(&span, j, first, last);
    }
    return span;
}

/* detail_grain(original, out, mask, taps, frame_w, frame_h, channels, mask_w, mask_h,
 *              bx, by, bw, bh, x1, y1, x2, y2, m0, m1, m2, m3, m4, m5, step, sign, least)
 *   original  uint8 (frame_h, frame_w, channels): the frame before the face was pasted
 *   out       uint8, the same size: the frame with the face pasted, changed in place
 *   mask      float32 (mask_h, mask_w): the crop's detail mask, whose window
 *             (bx, by, bw, bh) is warped onto the frame box (x1, y1)-(x2, y2) by m
 *             (window -> box, as given to cv2.warpAffine: bilinear, 0 outside)
 *   taps      float32 (k,), k odd: the low-pass's kernel along rows and columns
 *   Over the bounding box of the warped mask's values above 0.01 (at least
 *   `least` pixels, with at least `least` of them above 0.5):
 *   out = clip(out + sign * (src - low) * (step * mask) + 0.5, 0, 255) truncated,
 *   src the original frame (sign 1) or out as pasted (sign -1), low its low-pass
 *   over that box with mirrored edges (cv2.sepFilter2D, BORDER_REFLECT_101).
 *   Returns the box (X1, Y1, X2, Y2), or None where too little of the mask
 *   lands (nothing is changed then).
 */
static PyObject *detail_grain(PyObject *self, PyObject *args) {
    Py_buffer orig_b, out_b, mask_b, taps_b;
    int fw, fh, ch, mw, mh, bx, by, bw, bh, x1, y1, x2, y2, sign, least;
    double m[6];
    float step;
    if (!PyArg_ParseTuple(args, "y*w*y*y*iiiiiiiiiiiiiddddddfii", &orig_b, &out_b, &mask_b, &taps_b, &fw, &fh, &ch,
                          &mw, &mh, &bx, &by, &bw, &bh, &x1, &y1, &x2, &y2, &m[0], &m[1], &m[2], &m[3], &m[4], &m[5],
                          &step, &sign, &least))
        return NULL;
    PyObject *result = NULL;
    float *warped = NULL, *tmp = NULL, *ring = NULL, *low = NULL, *each = NULL;
    int *delta = NULL;
    uint8_t *copy = NULL, *cells = NULL;
    int k = (int)(taps_b.len / (Py_ssize_t)sizeof(float));
    if (fw <= 0 || fh <= 0 || ch <= 0 || ch > 4 || orig_b.len != (Py_ssize_t)fw * fh * ch || out_b.len != orig_b.len
        || mw <= 0 || mh <= 0 || mask_b.len != (Py_ssize_t)mw * mh * (Py_ssize_t)sizeof(float)
        || taps_b.len != (Py_ssize_t)k * (Py_ssize_t)sizeof(float) || k % 2 == 0 || k > 63) {
        PyErr_SetString(PyExc_ValueError, "original, out, mask and taps must match their sizes (taps: an odd count)");
        goto done;
    }
    if (bw <= 0 || bh <= 0 || bx < 0 || by < 0 || bx + bw > mw || by + bh > mh || x1 < 0 || y1 < 0 || x2 > fw
        || y2 > fh || x2 <= x1 || y2 <= y1 || (sign != 1 && sign != -1)) {
        PyErr_SetString(PyExc_ValueError, "the window must lie in the mask, the box in the frame, sign be 1 or -1");
        goto done;
    }
    invert_affine(m); /* the inverse, as warpAffine makes it */
    int W = x2 - x1, H = y2 - y1, r = k / 2;
    warped = PyMem_RawMalloc((size_t)W * H * sizeof(float));
    delta = PyMem_RawMalloc(2 * (size_t)W * sizeof(int));
    tmp = PyMem_RawMalloc((size_t)(W + 2 * r) * ch * sizeof(float));
    ring = PyMem_RawMalloc((size_t)k * W * ch * sizeof(float));
    cells = PyMem_RawMalloc((size_t)bw * bh);
    if (warped == NULL || delta == NULL || tmp == NULL || ring == NULL || cells == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const uint8_t *orig = (const uint8_t *)orig_b.buf;
    uint8_t *out = (uint8_t *)out_b.buf;
    const float *window = (const float *)mask_b.buf + (Py_ssize_t)by * mw + bx;
    const float *f = (const float *)taps_b.buf;
    Py_ssize_t row = (Py_ssize_t)fw * ch;
    int fits = 1;
    MaskSpan span;
    Py_BEGIN_ALLOW_THREADS
    span = warp_mask(warped, delta, cells, window, mw, bw, bh, m, W, H);
    if (span.hx < 0 || (Py_ssize_t)(span.hx - span.lx + 1) * (span.hy - span.ly + 1) < least || span.over < least)
        fits = 0;
    Py_END_ALLOW_THREADS
    if (!fits) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    int lx = span.lx, ly = span.ly, w = span.hx - lx + 1, h = span.hy - ly + 1, X1 = x1 + lx, Y1 = y1 + ly;
    Py_ssize_t line = (Py_ssize_t)w * ch;
    low = PyMem_RawMalloc((size_t)line * sizeof(float));
    each = PyMem_RawMalloc((size_t)line * sizeof(float));
    if (low == NULL || each == NULL || (sign < 0 && (copy = PyMem_RawMalloc((size_t)h * line)) == NULL)) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    const uint8_t *src = orig + (Py_ssize_t)Y1 * row + (Py_ssize_t)X1 * ch;
    Py_ssize_t src_row = row;
    if (sign < 0) { /* out's own band: read from a copy, as out is written row by row */
        for (int j = 0; j < h; j++)
            memcpy(copy + (Py_ssize_t)j * line, out + (Py_ssize_t)(Y1 + j) * row + (Py_ssize_t)X1 * ch, (size_t)line);
        src = copy;
        src_row = line;
    }
    for (int v = -r; v < r; v++) /* the rows filtered ahead of the first */
        filtered_row(ring + (Py_ssize_t)((v + r) % k) * line, tmp, src + reflect101(v, h) * src_row, w, ch, f, k);
    for (int j = 0; j < h; j++) {
        int v = j + r;
        filtered_row(ring + (Py_ssize_t)((v + r) % k) * line, tmp, src + reflect101(v, h) * src_row, w, ch, f, k);
        const uint8_t *s = src + (Py_ssize_t)j * src_row;
        uint8_t *o = out + (Py_ssize_t)(Y1 + j) * row + (Py_ssize_t)X1 * ch;
        const float *mrow = warped + (Py_ssize_t)(ly + j) * W + lx;
        const float *rows[64];
        for (int t = 0; t < k; t++) /* rows j - r .. j + r of the ring */
            rows[t] = ring + (Py_ssize_t)((j + t) % k) * line;
        spread_step(each, mrow, w, ch, sign > 0 ? step : -step);
        grain_row(o, s, low, each, rows, f, k, line);
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(iiii)", X1, Y1, X1 + w, Y1 + h);
done:
    PyMem_RawFree(warped);
    PyMem_RawFree(delta);
    PyMem_RawFree(tmp);
    PyMem_RawFree(ring);
    PyMem_RawFree(low);
    PyMem_RawFree(each);
    PyMem_RawFree(copy);
    PyMem_RawFree(cells);
    PyBuffer_Release(&orig_b);
    PyBuffer_Release(&out_b);
    PyBuffer_Release(&mask_b);
    PyBuffer_Release(&taps_b);
    return result;
}

/* the field along a run of pixels that read the same four grid samples g
 * (g00, g01, g10, g11: dx, dy, moved each), bilinear in warpAffine's float
 * weights (vy0 * vx0 ...) summed in its order: offsets (dx, dy) and moved */
WIDE_CLONES
static void field_run(float *restrict off, float *restrict chg, const float *restrict xw, const float *restrict g,
                      float vy0, float ay, int n) {
    for (int i = 0; i < n; i++) {
        float vx0 = xw[2 * i], ax = xw[2 * i + 1];
        float w00 = vy0 * vx0, w01 = vy0 * ax, w10 = ay * vx0, w11 = ay * ax;
        off[2 * i] = g[0] * w00 + g[3] * w01 + g[6] * w10 + g[9] * w11;
        off[2 * i + 1] = g[1] * w00 + g[4] * w01 + g[7] * w10 + g[10] * w11;
        chg[i] = g[2] * w00 + g[5] * w01 + g[8] * w10 + g[11] * w11;
    }
}

/* warp_by_grid(grid, pixels, offsets, changed, out, grid_w, grid_h, width, height, channels, step)
 *   grid     float32 (grid_h, grid_w, 3): a smooth field every step pixels (dx, dy, how much moved),
 *            sample (i, j) at pixel (j * step, i * step)
 *   pixels   uint8 (height, width, channels): the picture the field moves
 *   offsets  float32 (height, width, 2) and changed float32 (height, width): the field at every
 *            pixel, as cv2.warpAffine of the grid by 1 / step (bilinear, replicated edges) gives
 *   out      uint8 (height, width, channels): pixels sampled at (x + dx, y + dy), as cv2.remap
 *            (bilinear, replicated edges) of the float maps gives
 */
static PyObject *warp_by_grid(PyObject *self, PyObject *args) {
    Py_buffer grid_b, pix_b, off_b, chg_b, out_b;
    int gw, gh, w, h, ch, step;
    if (!PyArg_ParseTuple(args, "y*y*w*w*w*iiiiii", &grid_b, &pix_b, &off_b, &chg_b, &out_b, &gw, &gh, &w, &h, &ch,
                          &step))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t pixels = (Py_ssize_t)w * h, fsize = sizeof(float);
    if (gw <= 0 || gh <= 0 || w <= 0 || h <= 0 || ch <= 0 || ch > 4 || step <= 0
        || grid_b.len != (Py_ssize_t)gw * gh * 3 * fsize || pix_b.len != pixels * ch
        || off_b.len != pixels * 2 * fsize || chg_b.len != pixels * fsize || out_b.len != pixels * ch) {
        PyErr_SetString(PyExc_ValueError, "grid, pixels, offsets, changed and out must match their sizes");
        goto done;
    }
    const float *restrict grid = (const float *)grid_b.buf;
    const uint8_t *restrict src = (const uint8_t *)pix_b.buf;
    float *restrict off = (float *)off_b.buf, *restrict chg = (float *)chg_b.buf;
    uint8_t *restrict out = (uint8_t *)out_b.buf;
    double scale = 1.0 / step;
    /* per column: the grid's two columns (as offsets into a grid row) and
     * warpAffine's weights along x (its steps along a row; its bdelta is 0);
     * runs: the columns that read the same two grid columns, in turn */
    int *cols = PyMem_RawMalloc(2 * (size_t)w * sizeof(int));
    int *runs = PyMem_RawMalloc(((size_t)w + 1) * sizeof(int));
    float *xw = PyMem_RawMalloc(2 * (size_t)w * sizeof(float));
    uint8_t *still = PyMem_RawMalloc((size_t)gw * gh);
    if (cols == NULL || runs == NULL || xw == NULL || still == NULL) {
        PyMem_RawFree(cols);
        PyMem_RawFree(runs);
        PyMem_RawFree(xw);
        PyMem_RawFree(still);
        PyErr_NoMemory();
        goto done;
    }
    /* grid samples where nothing moves (all three values 0): a pixel whose
     * four samples are all still keeps its own level exactly (a bilinear
     * sum of zeros is 0, its map is the pixel itself, its weights 1, 0, 0, 0) */
    for (Py_ssize_t n = 0; n < (Py_ssize_t)gw * gh; n++)
        still[n] = grid[3 * n] == 0.0f && grid[3 * n + 1] == 0.0f && grid[3 * n + 2] == 0.0f;
    int count = 0;
    for (int i = 0; i < w; i++) {
        int X = ((int)lrint(scale * i * AB_SCALE) + AB_SCALE / TAB / 2) >> 5, gx = X >> 5;
        float ax = (float)(X & (TAB - 1)) * (1.0f / TAB);
        cols[2 * i] = clampi(gx, 0, gw - 1) * 3;
        cols[2 * i + 1] = clampi(gx + 1, 0, gw - 1) * 3;
        xw[2 * i] = 1.0f - ax;
        xw[2 * i + 1] = ax;
        if (i == 0 || cols[2 * i] != cols[2 * i - 2] || cols[2 * i + 1] != cols[2 * i - 1])
            runs[count++] = i;
    }
    runs[count] = w;
    Py_ssize_t gstride = (Py_ssize_t)gw * 3, stride = (Py_ssize_t)w * ch;
    Py_BEGIN_ALLOW_THREADS
    for (int j = 0; j < h; j++) {
        int Y = ((int)lrint(scale * j * AB_SCALE) + AB_SCALE / TAB / 2) >> 5, gy = Y >> 5;
        const float *row0 = grid + clampi(gy, 0, gh - 1) * gstride, *row1 = grid + clampi(gy + 1, 0, gh - 1) * gstride;
        float ay = (float)(Y & (TAB - 1)) * (1.0f / TAB), vy0 = 1.0f - ay;
        const uint8_t *still0 = still + clampi(gy, 0, gh - 1) * gw, *still1 = still + clampi(gy + 1, 0, gh - 1) * gw;
        for (int r = 0; r < count; r++) {
            int i0 = runs[r], i1 = runs[r + 1], c0 = cols[2 * i0], c1 = cols[2 * i0 + 1];
            Py_ssize_t p0 = (Py_ssize_t)j * w + i0, n = i1 - i0;
            if (still0[c0 / 3] & still0[c1 / 3] & still1[c0 / 3] & still1[c1 / 3]) { /* the run keeps its levels */
                memset(off + 2 * p0, 0, 2 * (size_t)n * sizeof(float));
                memset(chg + p0, 0, (size_t)n * sizeof(float));
                memcpy(out + p0 * ch, src + p0 * ch, (size_t)n * ch);
                continue;
            }
            const float g[12] = {row0[c0], row0[c0 + 1], row0[c0 + 2], row0[c1], row0[c1 + 1], row0[c1 + 2],
                                 row1[c0], row1[c0 + 1], row1[c0 + 2], row1[c1], row1[c1 + 1], row1[c1 + 2]};
            field_run(off + 2 * p0, chg + p0, xw + 2 * (Py_ssize_t)i0, g, vy0, ay, (int)n);
            for (int i = i0; i < i1; i++) {
                Py_ssize_t p = (Py_ssize_t)j * w + i;
                /* remap's maps in 1/32 pixel (cvRound), then its 15-bit bilinear weights */
                float mx = off[2 * p] + (float)i, my = off[2 * p + 1] + (float)j;
                int sx32 = (int)lrintf(mx * (float)TAB), sy32 = (int)lrintf(my * (float)TAB);
                int sx = clampi(sx32 >> 5, -32768, 32767), sy = clampi(sy32 >> 5, -32768, 32767);
                int ux = sx32 & (TAB - 1), uy = sy32 & (TAB - 1);
                uint8_t *o = out + p * ch;
                if (sx >= 0 && sy >= 0 && sx < w - 1 && sy < h - 1) { /* all four neighbours inside */
                    int k00 = (TAB - uy) * (TAB - ux) * 32, k01 = (TAB - uy) * ux * 32, k10 = uy * (TAB - ux) * 32,
                        k11 = uy * ux * 32;
                    const uint8_t *q = src + (Py_ssize_t)sy * stride + (Py_ssize_t)sx * ch;
                    for (int c = 0; c < ch; c++)
                        o[c] = (uint8_t)((q[c] * k00 + q[ch + c] * k01 + q[stride + c] * k10
                                          + q[stride + ch + c] * k11 + (1 << 14))
                                         >> 15);
                } else {
                    for (int c = 0; c < ch; c++)
                        o[c] = (uint8_t)sample_u8(src, stride, ch, c, sx, sy, ux, uy, w, h);
                }
            }
        }
    }
    Py_END_ALLOW_THREADS
    PyMem_RawFree(runs);
    PyMem_RawFree(cols);
    PyMem_RawFree(xw);
    PyMem_RawFree(still);
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&grid_b);
    PyBuffer_Release(&pix_b);
    PyBuffer_Release(&off_b);
    PyBuffer_Release(&chg_b);
    PyBuffer_Release(&out_b);
    return result;
}

/* a table of steps + 1 samples over [0, 1] at v (>= 0), linearly interpolated */
static inline float table_at(const float *table, int steps, float v) {
    float t = v * (float)steps;
    int i = (int)t;
    if (i > steps - 1)
        i = steps - 1;
    float frac = t - (float)i;
    return table[i] + frac * (table[i + 1] - table[i]);
}

/* reciprocals of OpenCV's Lab constants: a product, not a division, per pixel */
#define INV_903_3 ((float)(1.0 / 903.3))
#define INV_116 ((float)(1.0 / 116.0))
#define INV_500 ((float)(1.0 / 500.0))
#define INV_200 ((float)(1.0 / 200.0))
#define INV_7_787 ((float)(1.0 / 7.787))

static inline float lab_uncube(float f) {
    return f > 0.206893f ? f * f * f : (f - (float)(16.0 / 116.0)) * INV_7_787;
}

/* one mapped chroma value: q = gain, shift, sign, edge, add */
static inline float chroma_map(const float *q, float v) {
    if (q[2] != 0.0f && v * q[2] > q[3])
        return v + q[4];
    return v * q[0] + q[1];
}

/* shade_face(lab, offset, coverage, behind, out, degamma, params, crop_w, crop_h, x0, y0, x1, y1, steps)
 *   lab, offset   float32 (y1 - y0, x1 - x0, 3): the new face's window in CIELAB, and
 *                 what is added to it after the mapping
 *   coverage      float32 (crop_h, crop_w): where the new face covers the crop
 *   behind        uint8 (crop_h, crop_w, 3): the crop behind the new face
 *   out           float32 (y1 - y0, x1 - x0, 3), written: lab mapped, offset and
 *                 back in 8-bit sRGB levels (rounded, clipped) where coverage
 *                 > 0.5, else behind's levels
 *   degamma       float32 (steps + 1): the sRGB curve over [0, 1]
 *   params        float32 (23): XYZ * white -> RGB (9), lightness gain, own, ref,
 *                 a (gain, shift, sign, edge, add), b (the same), share
 * OpenCV's float Lab -> RGB formulas; faceweave/kernels/reference.py
 * shade_face is the same arithmetic in NumPy.
 */
static PyObject *shade_face(PyObject *self, PyObject *args) {
    Py_buffer lab_b, off_b, cov_b, behind_b, out_b, deg_b, par_b;
    int cw, chh, x0, y0, x1, y1, steps;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*y*y*iiiiiii", &lab_b, &off_b, &cov_b, &behind_b, &out_b, &deg_b, &par_b,
                          &cw, &chh, &x0, &y0, &x1, &y1, &steps))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t fsize = sizeof(float), crop = (Py_ssize_t)cw * chh, window = (Py_ssize_t)(x1 - x0) * (y1 - y0);
    if (cw <= 0 || chh <= 0 || x0 < 0 || y0 < 0 || x1 > cw || y1 > chh || x1 <= x0 || y1 <= y0 || steps < 1) {
        PyErr_SetString(PyExc_ValueError, "the window must lie inside the crop");
        goto done;
    }
    if (behind_b.len != crop * 3 || cov_b.len != crop * fsize || lab_b.len != window * 3 * fsize
        || off_b.len != window * 3 * fsize || out_b.len != window * 3 * fsize || deg_b.len != (steps + 1) * fsize
        || par_b.len != 23 * fsize) {
        PyErr_SetString(PyExc_ValueError, "behind and coverage must match the crop, lab, offset and out the window");
        goto done;
    }
    const uint8_t *behind = (const uint8_t *)behind_b.buf;
    const float *lab = (const float *)lab_b.buf, *off = (const float *)off_b.buf, *cov = (const float *)cov_b.buf;
    const float *deg = (const float *)deg_b.buf, *inv = (const float *)par_b.buf, *map = inv + 9;
    float *out = (float *)out_b.buf;
    int w = x1 - x0;
    Py_BEGIN_ALLOW_THREADS
    for (int j = y0; j < y1; j++) {
        for (int i = x0; i < x1; i++) {
            Py_ssize_t p = (Py_ssize_t)j * cw + i, q = ((Py_ssize_t)(j - y0) * w + (i - x0)) * 3;
            if (!(cov[p] > 0.5f)) {
                for (int c = 0; c < 3; c++)
                    out[q + c] = (float)behind[p * 3 + c];
                continue;
            }
            const float *v = lab + q;
            float m[3] = {(v[0] - map[1]) * map[0] + map[2], chroma_map(map + 3, v[1]), chroma_map(map + 8, v[2])};
            float s[3];
            for (int c = 0; c < 3; c++)
                s[c] = (map[13] >= 1.0f ? m[c] : v[c] + map[13] * (m[c] - v[c])) + off[q + c];
            float y, fy;
            if (s[0] <= 7.9996248f) {
                y = s[0] * INV_903_3;
                fy = 7.787f * y + (float)(16.0 / 116.0);
            } else {
                fy = (s[0] + 16.0f) * INV_116;
                y = fy * fy * fy;
            }
            float x = lab_uncube(s[1] * INV_500 + fy), z = lab_uncube(fy - s[2] * INV_200);
            for (int c = 0; c < 3; c++) {
                float u = x * inv[3 * c] + y * inv[3 * c + 1] + z * inv[3 * c + 2];
                u = u > 1.0f ? 1.0f : u;
                u = u >= 0.0f ? u : 0.0f;
                u = table_at(deg, steps, u) * 255.0f + 0.5f;
                out[q + c] = u >= 255.0f ? 255.0f : (float)(int)u;
            }
        }
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&lab_b);
    PyBuffer_Release(&off_b);
    PyBuffer_Release(&cov_b);
    PyBuffer_Release(&behind_b);
    PyBuffer_Release(&out_b);
    PyBuffer_Release(&deg_b);
    PyBuffer_Release(&par_b);
    return result;
}

/* Where row or column i of an upscaled picture samples its source of n
 * (OpenCV's INTER_LINEAR coordinates): first tap, second tap and the second
 * tap's weight (the first's is 1 - weight).  cols: the first tap is pinned
 * to the edges with weight 0 (OpenCV's horizontal pass); rows: the taps are
 * clipped to the picture and the weights kept (its vertical pass). */
static void linear_taps(int i, double scale, int n, int cols, int *t0, int *t1, float *w1) {
    float f = (float)((i + 0.5) * scale - 0.5);
    int s = (int)floorf(f);
    f -= (float)s;
    if (cols) {
        if (s < 0)
            s = 0, f = 0.0f;
        if (s >= n - 1)
            s = n - 1, f = 0.0f;
        *t0 = s;
        *t1 = s + 1 < n ? s + 1 : n - 1;
    } else {
        *t0 = s < 0 ? 0 : (s >= n ? n - 1 : s);
        *t1 = s + 1 < 0 ? 0 : (s + 1 >= n ? n - 1 : s + 1);
    }
    *w1 = f;
}

/* v clipped to the int16 range and rounded to the nearest, ties to even
 * (lrintf's, as cvtps2dq's under the default MXCSR) */
static inline long int16_round(float v) { return lrintf(v > 32767.0f ? 32767.0f : (v < -32768.0f ? -32768.0f : v)); }

/* One row of mark_luma: y += round(p * (r0 * b0 + r1 * b1)), the product
 * clipped to int16 and the sum to 0..255, rounding to the nearest, ties to
 * even (lrintf's, and cvtps2dq's under the default MXCSR).  On x86-64 sixteen
 * pixels at a time in SSE2 (the same float32 products and sums, in the same
 * order; the int16 clip by packs_epi32, the sum saturated, then packus to
 * 0..255); the rest, and other machines, one at a time. */
static void mark_row(uint8_t *y, const float *p, const float *r0, const float *r1, float b0, float b1, int w) {
    int i = 0;
#ifdef __SSE2__
    const __m128 vb0 = _mm_set1_ps(b0), vb1 = _mm_set1_ps(b1);
    const __m128 hi = _mm_set1_ps(32767.0f), lo = _mm_set1_ps(-32768.0f);
    const __m128i zero = _mm_setzero_si128();
    for (; i + 16 <= w; i += 16) {
        __m128i d[4];
        for (int k = 0; k < 4; k++) {
            __m128 m = _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(r0 + i + 4 * k), vb0),
                                  _mm_mul_ps(_mm_loadu_ps(r1 + i + 4 * k), vb1));
            __m128 v = _mm_mul_ps(_mm_loadu_ps(p + i + 4 * k), m);
            d[k] = _mm_cvtps_epi32(_mm_max_ps(_mm_min_ps(v, hi), lo));
        }
        __m128i px = _mm_loadu_si128((const __m128i *)(y + i));
        __m128i low = _mm_adds_epi16(_mm_unpacklo_epi8(px, zero), _mm_packs_epi32(d[0], d[1]));
        __m128i high = _mm_adds_epi16(_mm_unpackhi_epi8(px, zero), _mm_packs_epi32(d[2], d[3]));
        _mm_storeu_si128((__m128i *)(y + i), _mm_packus_epi16(low, high));
    }
#endif
    for (; i < w; i++) {
        float v = p[i] * (r0[i] * b0 + r1[i] * b1);
        long d = int16_round(v);
        long sum = (long)y[i] + d;
        y[i] = (uint8_t)(sum < 0 ? 0 : (sum > 255 ? 255 : sum));
    }
}

/* The rises and the falls of one row of mark_pixels: round(t * m), the
 * product clipped to int16 before rounding to the nearest, ties to even
 * (cv2.multiply's to CV_16S for any product within the int32 range), as
 * two uint8 planes saturated at 255 (a sum with a pixel is clipped at 0..255
 * either way).  On x86-64 sixteen at a time in SSE2 (cvtps2dq rounds as
 * lrintf under the default MXCSR); the rest one at a time. */
static void mark_deltas(uint8_t *restrict up, uint8_t *restrict down, const float *restrict t,
                        const float *restrict m, int w) {
    int i = 0;
#ifdef __SSE2__
    const __m128 hi = _mm_set1_ps(32767.0f), lo = _mm_set1_ps(-32768.0f);
    const __m128i zero = _mm_setzero_si128();
    for (; i + 16 <= w; i += 16) {
        __m128i d[4];
        for (int k = 0; k < 4; k++) {
            __m128 v = _mm_mul_ps(_mm_loadu_ps(t + i + 4 * k), _mm_loadu_ps(m + i + 4 * k));
            d[k] = _mm_cvtps_epi32(_mm_max_ps(_mm_min_ps(v, hi), lo));
        }
        __m128i a = _mm_packs_epi32(d[0], d[1]), b = _mm_packs_epi32(d[2], d[3]);
        _mm_storeu_si128((__m128i *)(up + i), _mm_packus_epi16(a, b));
        _mm_storeu_si128((__m128i *)(down + i), _mm_packus_epi16(_mm_subs_epi16(zero, a), _mm_subs_epi16(zero, b)));
    }
#endif
    for (; i < w; i++) {
        float v = t[i] * m[i];
        long d = int16_round(v);
        up[i] = (uint8_t)(d > 255 ? 255 : (d > 0 ? d : 0));
        down[i] = (uint8_t)(d < -255 ? 255 : (d < 0 ? -d : 0));
    }
}

/* One row of mark_pixels: each of the first `colours` channels of a pixel
 * plus its rise and minus its fall, saturated; a fourth channel (alpha) copied */
static void add_deltas_plain(uint8_t *o, const uint8_t *p, const uint8_t *up, const uint8_t *down, int w, int ch) {
    int colours = ch < 3 ? ch : 3;
    for (int i = 0; i < w; i++)
        for (int c = 0; c < ch; c++) {
            int v = c < colours ? p[i * ch + c] + up[i] - down[i] : p[i * ch + c];
            o[i * ch + c] = (uint8_t)(v < 0 ? 0 : (v > 255 ? 255 : v));
        }
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#include <tmmintrin.h>
/* add_deltas_plain for RGB, sixteen pixels at a time: the rises and the
 * falls spread to the three channels by pshufb, added and taken away with
 * unsigned saturation (the same as the clipped sum: a pixel has one or the
 * other); returns the pixels done */
__attribute__((target("ssse3"))) static int add_deltas_rgb(uint8_t *o, const uint8_t *p, const uint8_t *up,
                                                          const uint8_t *down, int w) {
    const __m128i spread[3] = {
        _mm_setr_epi8(0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5),
        _mm_setr_epi8(5, 5, 6, 6, 6, 7, 7, 7, 8, 8, 8, 9, 9, 9, 10, 10),
        _mm_setr_epi8(10, 11, 11, 11, 12, 12, 12, 13, 13, 13, 14, 14, 14, 15, 15, 15),
    };
    int i = 0;
    for (; i + 16 <= w; i += 16) {
        __m128i u = _mm_loadu_si128((const __m128i *)(up + i)), d = _mm_loadu_si128((const __m128i *)(down + i));
        for (int k = 0; k < 3; k++) {
            __m128i px = _mm_loadu_si128((const __m128i *)(p + 3 * i + 16 * k));
            px = _mm_subs_epu8(_mm_adds_epu8(px, _mm_shuffle_epi8(u, spread[k])), _mm_shuffle_epi8(d, spread[k]));
            _mm_storeu_si128((__m128i *)(o + 3 * i + 16 * k), px);
        }
    }
    return i;
}
#endif

static void add_deltas(uint8_t *o, const uint8_t *p, const uint8_t *up, const uint8_t *down, int w, int ch,
                       int fast) {
    int done = 0;
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
    if (fast && ch == 3)
        done = add_deltas_rgb(o, p, up, down, w);
#endif
    (void)fast;
    add_deltas_plain(o + (Py_ssize_t)done * ch, p + (Py_ssize_t)done * ch, up + done, down + done, w - done, ch);
}

/* mark_pixels(pixels, tile, mask, out, width, height, channels, tile_size)
 *   pixels, out  uint8 (height, width, channels): channels 1 (grey), 3 (RGB)
 *                or 4 (RGBA, the alpha copied); out written whole
 *   tile         float32 (tile_size, tile_size): the mark's tile, repeated
 *                from the top-left corner
 *   mask         float32 (height, width): the perceptual mask
 *   wide         0: one pixel at a time (the tests' second path)
 *   out = clip(pixels + round(tile[y % T][x % T] * mask[y][x]), 0, 255) in
 *   every colour channel (mark_deltas); the tiled pattern is never made
 */
static PyObject *mark_pixels(PyObject *self, PyObject *args) {
    Py_buffer pix_b, tile_b, mask_b, out_b;
    int w, h, ch, t, wide;
    if (!PyArg_ParseTuple(args, "y*y*y*w*iiiii", &pix_b, &tile_b, &mask_b, &out_b, &w, &h, &ch, &t, &wide))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t px = (Py_ssize_t)w * h;
    float *row = NULL;
    uint8_t *up = NULL, *down = NULL;
    if (w <= 0 || h <= 0 || t <= 0 || (ch != 1 && ch != 3 && ch != 4) || pix_b.len != px * ch || out_b.len != px * ch
        || tile_b.len != (Py_ssize_t)t * t * (Py_ssize_t)sizeof(float)
        || mask_b.len != px * (Py_ssize_t)sizeof(float)) {
        PyErr_SetString(PyExc_ValueError, "pixels, out and mask must be width x height, tile tile_size squared");
        goto done;
    }
    row = PyMem_RawMalloc(sizeof(float) * w), up = PyMem_RawMalloc(w), down = PyMem_RawMalloc(w);
    if (!row || !up || !down) {
        PyErr_NoMemory();
        goto done;
    }
    const uint8_t *pix = (const uint8_t *)pix_b.buf;
    const float *tile = (const float *)tile_b.buf, *mask = (const float *)mask_b.buf;
    uint8_t *out = (uint8_t *)out_b.buf;
    int fast = 0;
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
    fast = wide && __builtin_cpu_supports("ssse3");
#endif
    Py_BEGIN_ALLOW_THREADS
    for (int j = 0; j < h; j++) {
        const float *trow = tile + (Py_ssize_t)(j % t) * t;
        for (int i = 0; i < w; i += t) /* the tile's row repeated along the frame's */
            memcpy(row + i, trow, sizeof(float) * (size_t)(w - i < t ? w - i : t));
        mark_deltas(up, down, row, mask + (Py_ssize_t)j * w, w);
        add_deltas(out + (Py_ssize_t)j * w * ch, pix + (Py_ssize_t)j * w * ch, up, down, w, ch, fast);
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyMem_RawFree(row);
    PyMem_RawFree(up);
    PyMem_RawFree(down);
    PyBuffer_Release(&pix_b);
    PyBuffer_Release(&tile_b);
    PyBuffer_Release(&mask_b);
    PyBuffer_Release(&out_b);
    return result;
}

/* One source row upscaled to w samples: src[x0] * (1 - a) + src[x1] * a (OpenCV's horizontal pass). */
static void upscale_row(float *out, const float *src, const int *x0, const int *x1, const float *a, int w) {
    for (int i = 0; i < w; i++)
        out[i] = src[x0[i]] * (1.0f - a[i]) + src[x1[i]] * a[i];
}

/* mark_luma(luma, pattern, mask, width, height, mask_width, mask_height)
 *   luma     uint8 (height, width): a frame's Y plane, marked in place
 *   pattern  float32 (height, width): the mark's pattern in Y levels
 *   mask     float32 (mask_height, mask_width): the perceptual mask, upscaled
 *            bilinearly to the frame (cv2.resize INTER_LINEAR's coordinates
 *            and float32 passes, horizontal then vertical)
 *   luma += round(pattern * mask), the sum clipped to 0..255: cv2.resize,
 *   cv2.multiply to int16 and cv2.add to uint8 in one pass.
 *   faceweave/kernels/reference.py mark_luma is the same arithmetic in NumPy.
 */
static PyObject *mark_luma(PyObject *self, PyObject *args) {
    Py_buffer luma_b, pat_b, mask_b;
    int w, h, mw, mh;
    if (!PyArg_ParseTuple(args, "w*y*y*iiii", &luma_b, &pat_b, &mask_b, &w, &h, &mw, &mh))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t px = (Py_ssize_t)w * h;
    int *x0 = NULL, *x1 = NULL;
    float *ax = NULL, *row0 = NULL, *row1 = NULL;
    if (w <= 0 || h <= 0 || mw <= 0 || mh <= 0 || luma_b.len != px || pat_b.len != px * (Py_ssize_t)sizeof(float)
        || mask_b.len != (Py_ssize_t)mw * mh * (Py_ssize_t)sizeof(float)) {
        PyErr_SetString(PyExc_ValueError, "luma and pattern must be width x height, mask mask_width x mask_height");
        goto done;
    }
    x0 = PyMem_RawMalloc(sizeof(int) * w), x1 = PyMem_RawMalloc(sizeof(int) * w);
    ax = PyMem_RawMalloc(sizeof(float) * w);
    row0 = PyMem_RawMalloc(sizeof(float) * w), row1 = PyMem_RawMalloc(sizeof(float) * w);
    if (!x0 || !x1 || !ax || !row0 || !row1) {
        PyErr_NoMemory();
        goto done;
    }
    uint8_t *luma = (uint8_t *)luma_b.buf;
    const float *pat = (const float *)pat_b.buf, *mask = (const float *)mask_b.buf;
    Py_BEGIN_ALLOW_THREADS
    for (int i = 0; i < w; i++)
        linear_taps(i, 1.0 / ((double)w / mw), mw, 1, &x0[i], &x1[i], &ax[i]);
    int have0 = -1, have1 = -1;
    for (int j = 0; j < h; j++) {
        int r0, r1;
        float by;
        linear_taps(j, 1.0 / ((double)h / mh), mh, 0, &r0, &r1, &by);
        if (have0 != r0 && have1 == r0) { /* moved down a row: the second row is the first now */
            float *t = row0;
            row0 = row1, row1 = t, have0 = have1, have1 = -1;
        }
        if (have0 != r0)
            upscale_row(row0, mask + (Py_ssize_t)r0 * mw, x0, x1, ax, w), have0 = r0;
        if (have1 != r1)
            upscale_row(row1, mask + (Py_ssize_t)r1 * mw, x0, x1, ax, w), have1 = r1;
        mark_row(luma + (Py_ssize_t)j * w, pat + (Py_ssize_t)j * w, row0, row1, 1.0f - by, by, w);
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyMem_RawFree(x0);
    PyMem_RawFree(x1);
    PyMem_RawFree(ax);
    PyMem_RawFree(row0);
    PyMem_RawFree(row1);
    PyBuffer_Release(&luma_b);
    PyBuffer_Release(&pat_b);
    PyBuffer_Release(&mask_b);
    return result;
}

/* A level from a 10-bit fixed-point sum, clipped to 0..255 (the shift
 * rounds towards minus infinity, as OpenCV's does) */
static inline uint8_t fixed_level(int sum) {
    int v = sum >> 10;
    return (uint8_t)(v < 0 ? 0 : (v > 255 ? 255 : v));
}

/* The Y of two RGB rows a and b, and the Cb and Cr of their 2x2 blocks,
 * pixel pairs from `from` (even) to w, one at a time: cv2.transform's
 * (c0 * r + c1 * g + c2 * b + c3) >> 10 per output channel (c: 12 ints, Y
 * then Cb then Cr), the chroma on each block's mean (a + b + c + d + 2) >> 2
 * (cv2.resize INTER_AREA's halving). */
static void i420_pairs(uint8_t *y0, uint8_t *y1, uint8_t *cb, uint8_t *cr, const uint8_t *a, const uint8_t *b,
                       const int *c, int from, int w) {
    for (int i = from; i < w; i += 2) {
        const uint8_t *p[4] = {a + 3 * i, a + 3 * i + 3, b + 3 * i, b + 3 * i + 3};
        uint8_t *ys[4] = {y0 + i, y0 + i + 1, y1 + i, y1 + i + 1};
        int mean[3];
        for (int k = 0; k < 4; k++)
            *ys[k] = fixed_level(c[0] * p[k][0] + c[1] * p[k][1] + c[2] * p[k][2] + c[3]);
        for (int ch = 0; ch < 3; ch++)
            mean[ch] = (p[0][ch] + p[1][ch] + p[2][ch] + p[3][ch] + 2) >> 2;
        cb[i / 2] = fixed_level(c[4] * mean[0] + c[5] * mean[1] + c[6] * mean[2] + c[7]);
        cr[i / 2] = fixed_level(c[8] * mean[0] + c[9] * mean[1] + c[10] * mean[2] + c[11]);
    }
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#include <tmmintrin.h>
#define HAVE_SSSE3_PATH 1

/* Sixteen interleaved RGB pixels (48 bytes) as three planes of sixteen bytes. */
__attribute__((target("ssse3"))) static inline void split_rgb(const uint8_t *px, __m128i *r, __m128i *g, __m128i *b) {
    static const int8_t pick[3][3][16] = {
        {{0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
         {-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1},
         {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13}},
        {{1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
         {-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1},
         {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14}},
        {{2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
         {-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1},
         {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15}},
    };
    __m128i v[3], *out[3] = {r, g, b};
    for (int k = 0; k < 3; k++)
        v[k] = _mm_loadu_si128((const __m128i *)(px + 16 * k));
    for (int ch = 0; ch < 3; ch++) {
        __m128i m = _mm_shuffle_epi8(v[0], _mm_loadu_si128((const __m128i *)pick[ch][0]));
        m = _mm_or_si128(m, _mm_shuffle_epi8(v[1], _mm_loadu_si128((const __m128i *)pick[ch][1])));
        *out[ch] = _mm_or_si128(m, _mm_shuffle_epi8(v[2], _mm_loadu_si128((const __m128i *)pick[ch][2])));
    }
}

/* Four outputs (int32) of (k0 * r + k1 * g + k2 * b + k3) >> 10 from four
 * 16-bit lanes of r, g, b: rg and bz hold r, g and b, 0 interleaved. */
__attribute__((target("ssse3"))) static inline __m128i weigh4(__m128i rg, __m128i bz, __m128i krg, __m128i kb,
                                                              __m128i k3) {
    __m128i sum = _mm_add_epi32(_mm_madd_epi16(rg, krg), _mm_madd_epi16(bz, kb));
    return _mm_srai_epi32(_mm_add_epi32(sum, k3), 10);
}

/* Eight outputs as 16-bit lanes from eight 16-bit lanes of r, g and b
 * (weights k: four ints, as in i420_pairs). */
__attribute__((target("ssse3"))) static inline __m128i weigh8(__m128i r, __m128i g, __m128i b, const int *k) {
    const __m128i zero = _mm_setzero_si128();
    const __m128i krg = _mm_set1_epi32((int)((uint32_t)(uint16_t)k[0] | ((uint32_t)(uint16_t)k[1] << 16)));
    const __m128i kb = _mm_set1_epi32((int)(uint32_t)(uint16_t)k[2]), k3 = _mm_set1_epi32(k[3]);
    __m128i lo = weigh4(_mm_unpacklo_epi16(r, g), _mm_unpacklo_epi16(b, zero), krg, kb, k3);
    __m128i hi = weigh4(_mm_unpackhi_epi16(r, g), _mm_unpackhi_epi16(b, zero), krg, kb, k3);
    return _mm_packs_epi32(lo, hi);
}

/* One channel's 2x2 means of sixteen pixels of two rows (16-bit lanes of
 * each row's first and last eight): eight means, (a + b + c + d + 2) >> 2. */
__attribute__((target("ssse3"))) static inline __m128i block_means(__m128i alo, __m128i ahi, __m128i blo,
                                                                   __m128i bhi) {
    const __m128i ones = _mm_set1_epi16(1), two = _mm_set1_epi32(2);
    __m128i lo = _mm_srai_epi32(_mm_add_epi32(_mm_madd_epi16(_mm_add_epi16(alo, blo), ones), two), 2);
    __m128i hi = _mm_srai_epi32(_mm_add_epi32(_mm_madd_epi16(_mm_add_epi16(ahi, bhi), ones), two), 2);
    return _mm_packs_epi32(lo, hi);
}

/* i420_pairs for the pixels of the rows sixteen at a time (SSSE3: the same
 * integer arithmetic, so the same values); returns how many it did. */
__attribute__((target("ssse3"))) static int i420_sixteens(uint8_t *y0, uint8_t *y1, uint8_t *cb, uint8_t *cr,
                                                          const uint8_t *a, const uint8_t *b, const int *c, int w) {
    const __m128i zero = _mm_setzero_si128();
    int i = 0;
    for (; i + 16 <= w; i += 16) {
        __m128i plane[2][3], wide[2][3][2];
        split_rgb(a + 3 * i, &plane[0][0], &plane[0][1], &plane[0][2]);
        split_rgb(b + 3 * i, &plane[1][0], &plane[1][1], &plane[1][2]);
        for (int row = 0; row < 2; row++) {
            for (int ch = 0; ch < 3; ch++) {
                wide[row][ch][0] = _mm_unpacklo_epi8(plane[row][ch], zero);
                wide[row][ch][1] = _mm_unpackhi_epi8(plane[row][ch], zero);
            }
            __m128i lo = weigh8(wide[row][0][0], wide[row][1][0], wide[row][2][0], c);
            __m128i hi = weigh8(wide[row][0][1], wide[row][1][1], wide[row][2][1], c);
            _mm_storeu_si128((__m128i *)((row ? y1 : y0) + i), _mm_packus_epi16(lo, hi));
        }
        __m128i mean[3];
        for (int ch = 0; ch < 3; ch++)
            mean[ch] = block_means(wide[0][ch][0], wide[0][ch][1], wide[1][ch][0], wide[1][ch][1]);
        _mm_storel_epi64((__m128i *)(cb + i / 2), _mm_packus_epi16(weigh8(mean[0], mean[1], mean[2], c + 4), zero));
        _mm_storel_epi64((__m128i *)(cr + i / 2), _mm_packus_epi16(weigh8(mean[0], mean[1], mean[2], c + 8), zero));
    }
    return i;
}
#endif

/* rgb_to_i420(rgb, out, coefficients, width, height, wide)
 *   rgb           uint8 (height, width, 3), both sides even
 *   out           uint8 (height * 3 / 2, width): Y, then Cb, then Cr, written
 *   coefficients  int32 (12,): for Y, Cb and Cr the three RGB weights times
 *                 1024 and (offset + 0.5) times 1024, rounded (each weight
 *                 within +-32767)
 *   wide          0: one pixel pair at a time everywhere (for the tests)
 *   cv2.transform's 10-bit fixed point on uint8 (Y on the frame; Cb and Cr
 *   on the frame halved by cv2.resize INTER_AREA), to the bit.  Sixteen
 *   pixels at a time with SSSE3 where the processor has it.
 *   faceweave/kernels/reference.py rgb_to_i420 is that OpenCV formulation.
 */
static PyObject *rgb_to_i420(PyObject *self, PyObject *args) {
    Py_buffer rgb_b, out_b, co_b;
    int w, h, wide;
    if (!PyArg_ParseTuple(args, "y*w*y*iip", &rgb_b, &out_b, &co_b, &w, &h, &wide))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t px = (Py_ssize_t)w * h;
    if (w <= 0 || h <= 0 || w % 2 || h % 2 || rgb_b.len != 3 * px || out_b.len != px + px / 2
        || co_b.len != 12 * (Py_ssize_t)sizeof(int)) {
        PyErr_SetString(PyExc_ValueError, "rgb must be width x height x 3 with even sides, out (height * 3 / 2) x width");
        goto done;
    }
    const int *co = (const int *)co_b.buf;
    for (int k = 0; k < 12; k++) {
        if (k % 4 != 3 && (co[k] > 32767 || co[k] < -32767)) {
            PyErr_SetString(PyExc_ValueError, "each colour weight times 1024 must be within +-32767");
            goto done;
        }
    }
    const uint8_t *rgb = (const uint8_t *)rgb_b.buf;
    uint8_t *out = (uint8_t *)out_b.buf;
    Py_BEGIN_ALLOW_THREADS
    int fast = 0;
#ifdef HAVE_SSSE3_PATH
    fast = wide && __builtin_cpu_supports("ssse3");
#endif
    const Py_ssize_t quarter = px / 4, row = 3 * (Py_ssize_t)w;
    for (int j = 0; j < h; j += 2) {
        const uint8_t *a = rgb + (Py_ssize_t)j * row, *b = a + row;
        uint8_t *y0 = out + (Py_ssize_t)j * w, *y1 = y0 + w;
        uint8_t *cb = out + px + (Py_ssize_t)(j / 2) * (w / 2), *cr = cb + quarter;
        int from = 0;
#ifdef HAVE_SSSE3_PATH
        if (fast)
            from = i420_sixteens(y0, y1, cb, cr, a, b, co, w);
#endif
        i420_pairs(y0, y1, cb, cr, a, b, co, from, w);
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&rgb_b);
    PyBuffer_Release(&out_b);
    PyBuffer_Release(&co_b);
    return result;
}

static PyMethodDef methods[] = {
    {"put_detail", put_detail, METH_VARARGS, "Move a detail band under a mask and write the window into a frame."},
    {"paste_warped", paste_warped, METH_VARARGS, "Warp a crop and its mask into a frame and blend them there."},
    {"warp_by_grid", warp_by_grid, METH_VARARGS, "A smooth field on a grid to every pixel, and a picture moved by it."},
    {"shade_face", shade_face, METH_VARARGS, "A face's CIELAB window mapped, offset and back to 8-bit sRGB, or the crop behind."},
    {"detail_grain", detail_grain, METH_VARARGS, "Move a frame's detail band under a warped mask, low-pass and all, in place."},
    {"add_under", add_under, METH_VARARGS, "Values times a mask (times a share) added to a picture, in place."},
    {"mix_band", mix_band, METH_VARARGS, "One level of a multi-band blend mixed under its mask, in place."},
    {"mark_luma", mark_luma, METH_VARARGS, "A watermark's pattern under its upscaled mask added to a Y plane."},
    {"mark_pixels", mark_pixels, METH_VARARGS, "A watermark's tiled pattern under its mask added to a picture's colours."},
    {"rgb_to_i420", rgb_to_i420, METH_VARARGS, "An RGB frame as planar YUV 4:2:0 in OpenCV's fixed point."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pixels", "faceweave's compiled per-pixel kernels.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__pixels(void) {
    fill_weights(); /* filled once, read only after */
    return PyModule_Create(&module);
}
