/*
 * faceweave.kernels._raster: the mesh swapper's rasterizer and its
 * piecewise-affine maps, compiled when faceweave is installed.
 *
 * Both functions take contiguous buffers (NumPy arrays) and their sizes,
 * check every size and index before the loop, and run the loop with the
 * interpreter lock released.  The reference formulations, which give the
 * same values to the bit, are in faceweave/kernels/reference.py; the tests
 * compare the two.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>

/* An edge's test on row y as a function of x: inside where
 * !(k - c * (x - base) < limit), k = the row's first product.  In floating
 * point x - base, c * (x - base) and k - that are each monotonic in x, so
 * the pixels that pass form one run that reaches one end of the row (or all
 * or none of it). */
typedef struct {
    double k, c, base, limit;
} EdgeRow;

static inline int passes(const EdgeRow *e, int x) { return !(e->k - e->c * ((double)x - e->base) < e->limit); }

/* The row's run [*lo, *hi] narrowed to the pixels that pass the edge's
 * test: its end found from the line's crossing and then settled by the
 * test itself, pixel by pixel, so the run is the test's to the bit. */
static void narrow(const EdgeRow *e, int *lo, int *hi) {
    if (*lo > *hi)
        return;
    if (e->c == 0.0) { /* the same for every x */
        if (!passes(e, *lo))
            *hi = *lo - 1;
        return;
    }
    double cross = e->base + (e->k - e->limit) / e->c; /* where k - c * (x - base) = limit */
    int x = !isfinite(cross) ? (cross > 0 ? *hi : *lo) : (cross > *hi ? *hi : (cross < *lo ? *lo : (int)floor(cross)));
    if (e->c > 0.0) { /* falling in x: the run ends at the last pixel that passes */
        while (x >= *lo && !passes(e, x))
            x--;
        while (x + 1 <= *hi && passes(e, x + 1))
            x++;
        *hi = x;
    } else { /* rising: it starts at the first that passes */
        while (x <= *hi && !passes(e, x))
            x++;
        while (x - 1 >= *lo && passes(e, x - 1))
            x--;
        *lo = x;
    }
}

/* rasterize(points, triangles, order, ids, width, height, reach)
 *   points     float64 (N, 2) pixel coordinates
 *   triangles  int64 (T, 3) indices into points, either winding
 *   order      int64 (K,) triangle indices, drawn in turn (later ones win)
 *   ids        int32 (height, width), written: -1, then the last triangle of
 *              order whose area grown by reach pixels holds the pixel centre
 */
static PyObject *rasterize(PyObject *self, PyObject *args) {
    Py_buffer pts, tris, order, ids;
    int width, height;
    double reach;
    if (!PyArg_ParseTuple(args, "y*y*y*w*iid", &pts, &tris, &order, &ids, &width, &height, &reach))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n_points = pts.len / (Py_ssize_t)(2 * sizeof(double));
    Py_ssize_t n_tris = tris.len / (Py_ssize_t)(3 * sizeof(int64_t));
    Py_ssize_t n_order = order.len / (Py_ssize_t)sizeof(int64_t);
    if (width <= 0 || height <= 0 || ids.len != (Py_ssize_t)width * height * (Py_ssize_t)sizeof(int32_t)) {
        PyErr_Format(PyExc_ValueError, "ids must hold height x width = %d x %d int32 values", height, width);
        goto done;
    }
    if (pts.len % (Py_ssize_t)(2 * sizeof(double)) || tris.len % (Py_ssize_t)(3 * sizeof(int64_t))
        || order.len % (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "points must be float64 (N, 2), triangles int64 (T, 3), order int64 (K,)");
        goto done;
    }
    const double *p = (const double *)pts.buf;
    const int64_t *t = (const int64_t *)tris.buf;
    const int64_t *o = (const int64_t *)order.buf;
    for (Py_ssize_t k = 0; k < n_order; k++) {
        if (o[k] < 0 || o[k] >= n_tris) {
            PyErr_Format(PyExc_ValueError, "order[%zd] = %lld is not a triangle index", k, (long long)o[k]);
            goto done;
        }
    }
    for (Py_ssize_t k = 0; k < 3 * n_tris; k++) {
        if (t[k] < 0 || t[k] >= n_points) {
            PyErr_Format(PyExc_ValueError, "triangle index %lld is not a point index", (long long)t[k]);
            goto done;
        }
    }
    int32_t *out = (int32_t *)ids.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < (Py_ssize_t)width * height; k++)
        out[k] = -1;
    for (Py_ssize_t k = 0; k < n_order; k++) {
        const int64_t *tri = t + 3 * o[k];
        double ax = p[2 * tri[0]], ay = p[2 * tri[0] + 1];
        double bx = p[2 * tri[1]], by = p[2 * tri[1] + 1];
        double cx = p[2 * tri[2]], cy = p[2 * tri[2] + 1];
        if (!(isfinite(ax) && isfinite(ay) && isfinite(bx) && isfinite(by) && isfinite(cx) && isfinite(cy)))
            continue; /* a point that is not a number draws nothing */
        if ((bx - ax) * (cy - ay) - (by - ay) * (cx - ax) < 0.0) {
            double sx = bx, sy = by;
            bx = cx; by = cy; cx = sx; cy = sy;
        }
        double lo_x = fmin(ax, fmin(bx, cx)) - reach, hi_x = fmax(ax, fmax(bx, cx)) + reach;
        double lo_y = fmin(ay, fmin(by, cy)) - reach, hi_y = fmax(ay, fmax(by, cy)) + reach;
        if (!(hi_x >= 0.0 && hi_y >= 0.0 && lo_x <= width - 1 && lo_y <= height - 1))
            continue; /* off the map */
        int x0 = lo_x < 0.0 ? 0 : (int)floor(lo_x), y0 = lo_y < 0.0 ? 0 : (int)floor(lo_y);
        int x1 = hi_x > width - 1 ? width - 1 : (int)ceil(hi_x);
        int y1 = hi_y > height - 1 ? height - 1 : (int)ceil(hi_y);
        /* each edge: (p - start) x direction >= -reach * length */
        double l0 = -reach * (hypot(cx - bx, cy - by) + 1e-12);
        double l1 = -reach * (hypot(ax - cx, ay - cy) + 1e-12);
        double l2 = -reach * (hypot(bx - ax, by - ay) + 1e-12);
        int32_t index = (int32_t)o[k];
        for (int y = y0; y <= y1; y++) {
            /* the three edge tests, (cx - bx) * (y - by) - (cy - by) * (x - bx) < l0 and
             * alike, as runs of the row: the pixels between them take the triangle */
            EdgeRow e0 = {(cx - bx) * (y - by), cy - by, bx, l0}, e1 = {(ax - cx) * (y - cy), ay - cy, cx, l1},
                    e2 = {(bx - ax) * (y - ay), by - ay, ax, l2};
            int lo = x0, hi = x1;
            narrow(&e0, &lo, &hi);
            narrow(&e1, &lo, &hi);
            narrow(&e2, &lo, &hi);
            int32_t *row = out + (Py_ssize_t)y * width;
            for (int x = lo; x <= hi; x++)
                row[x] = index;
        }
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&pts);
    PyBuffer_Release(&tris);
    PyBuffer_Release(&order);
    PyBuffer_Release(&ids);
    return result;
}

/* affine_maps(ids, affines, map_x, map_y, width, height, x0, y0)
 *   ids       int32 (height, width), triangle indices or -1
 *   affines   float32 (T, 2, 3)
 *   map_x/y   float32 (height, width), written: affines[id] @ (x0 + i, y0 + j, 1),
 *             -1 where ids is -1, in float32 as ((a * x) + (b * y)) + c
 */
static PyObject *affine_maps(PyObject *self, PyObject *args) {
    Py_buffer ids, affines, map_x, map_y;
    int width, height, x0, y0;
    if (!PyArg_ParseTuple(args, "y*y*w*w*iiii", &ids, &affines, &map_x, &map_y, &width, &height, &x0, &y0))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t pixels = (Py_ssize_t)width * height;
    Py_ssize_t n_affines = affines.len / (Py_ssize_t)(6 * sizeof(float));
    if (width < 0 || height < 0 || ids.len != pixels * (Py_ssize_t)sizeof(int32_t)
        || map_x.len != pixels * (Py_ssize_t)sizeof(float) || map_y.len != pixels * (Py_ssize_t)sizeof(float)) {
        PyErr_Format(PyExc_ValueError, "ids, map_x and map_y must each hold %d x %d values", height, width);
        goto done;
    }
    const int32_t *in = (const int32_t *)ids.buf;
    for (Py_ssize_t k = 0; k < pixels; k++) {
        if (in[k] < -1 || in[k] >= n_affines) {
            PyErr_Format(PyExc_ValueError, "ids holds %d: not -1 or an index of the %zd affines", in[k], n_affines);
            goto done;
        }
    }
    const float *a = (const float *)affines.buf;
    float *mx = (float *)map_x.buf, *my = (float *)map_y.buf;
    Py_BEGIN_ALLOW_THREADS
    for (int j = 0; j < height; j++) {
        float y = (float)(y0 + j);
        for (int i = 0; i < width; i++) {
            Py_ssize_t k = (Py_ssize_t)j * width + i;
            int32_t id = in[k];
            if (id < 0) {
                mx[k] = -1.0f;
                my[k] = -1.0f;
                continue;
            }
            const float *m = a + 6 * (Py_ssize_t)id;
            float x = (float)(x0 + i);
            float ux = m[0] * x, uy = m[1] * y, vx = m[3] * x, vy = m[4] * y;
            float u = ux + uy, v = vx + vy;
            mx[k] = u + m[2];
            my[k] = v + m[5];
        }
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&ids);
    PyBuffer_Release(&affines);
    PyBuffer_Release(&map_x);
    PyBuffer_Release(&map_y);
    return result;
}

static PyMethodDef methods[] = {
    {"rasterize", rasterize, METH_VARARGS, "Draw triangles into an index map (see faceweave/kernels/raster.py)."},
    {"affine_maps", affine_maps, METH_VARARGS, "Piecewise-affine backward maps of an index map."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_raster", "faceweave's compiled rasterizer.", -1, methods};

PyMODINIT_FUNC PyInit__raster(void) { return PyModule_Create(&module); }
