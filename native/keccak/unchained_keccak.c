/* Batched Ethereum keccak256 for the PoG prover (provider_agent.keccak_native wraps it).
 *
 * Its own small distribution (native/keccak, `unchained-keccak`), which the `provider` extra pulls:
 * only a provider compiles it; a renter's install has no compiler step. One call hashes a
 * whole batch of equal-size messages with the GIL released, so several threads hash parts of
 * a batch at once and alongside torch; a Python call per message (protocol.merkle.hash_messages)
 * holds the GIL and runs on one core.
 *
 * Keccak-f[1600] as in FIPS 202 with Ethereum's padding (0x01 ... 0x80, not SHA-3's 0x06).
 * The tests compare every message size class (around the 136-byte rate) with pysha3 and
 * Merkle roots with pymerkle.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define RATE 136
#define MAX_MESSAGE 4096
#define ROTL(x, y) (((x) << (y)) | ((x) >> (64 - (y))))

static const uint64_t RC[24] = {
    0x0000000000000001ULL, 0x0000000000008082ULL, 0x800000000000808aULL, 0x8000000080008000ULL,
    0x000000000000808bULL, 0x0000000080000001ULL, 0x8000000080008081ULL, 0x8000000000008009ULL,
    0x000000000000008aULL, 0x0000000000000088ULL, 0x0000000080008009ULL, 0x000000008000000aULL,
    0x000000008000808bULL, 0x800000000000008bULL, 0x8000000000008089ULL, 0x8000000000008003ULL,
    0x8000000000008002ULL, 0x8000000000000080ULL, 0x000000000000800aULL, 0x800000008000000aULL,
    0x8000000080008081ULL, 0x8000000000008080ULL, 0x0000000080000001ULL, 0x8000000080008008ULL};
/* rho offsets and pi lane order, walking the lanes from (1, 0) as FIPS 202 3.2.2-3.2.3 do. */
static const int ROTC[24] = {1,  3,  6,  10, 15, 21, 28, 36, 45, 55, 2,  14,
                             27, 41, 56, 8,  25, 43, 62, 18, 39, 61, 20, 44};
static const int PILN[24] = {10, 7,  11, 17, 18, 3, 5,  16, 8,  21, 24, 4,
                             15, 23, 19, 13, 12, 2, 20, 14, 22, 9,  6,  1};

static void keccakf(uint64_t st[25]) {
  uint64_t bc[5], t;
  for (int r = 0; r < 24; r++) {
    /* theta */
#pragma GCC unroll 5
    for (int i = 0; i < 5; i++) bc[i] = st[i] ^ st[i + 5] ^ st[i + 10] ^ st[i + 15] ^ st[i + 20];
#pragma GCC unroll 5
    for (int i = 0; i < 5; i++) {
      t = bc[(i + 4) % 5] ^ ROTL(bc[(i + 1) % 5], 1);
#pragma GCC unroll 5
      for (int j = 0; j < 25; j += 5) st[j + i] ^= t;
    }
    /* rho and pi */
    t = st[1];
#pragma GCC unroll 24
    for (int i = 0; i < 24; i++) {
      int j = PILN[i];
      bc[0] = st[j];
      st[j] = ROTL(t, ROTC[i]);
      t = bc[0];
    }
    /* chi */
#pragma GCC unroll 5
    for (int j = 0; j < 25; j += 5) {
#pragma GCC unroll 5
      for (int i = 0; i < 5; i++) bc[i] = st[j + i];
#pragma GCC unroll 5
      for (int i = 0; i < 5; i++) st[j + i] ^= (~bc[(i + 1) % 5]) & bc[(i + 2) % 5];
    }
    /* iota */
    st[0] ^= RC[r];
  }
}

static uint64_t load64(const uint8_t *p) { /* lanes are little-endian on any host */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
#else
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
#endif
}

/* out[32*i ..] = keccak256(prefix || data[size*i .. size*(i+1)]) for i < count. */
static void keccak256_batch(const uint8_t *data, Py_ssize_t count, Py_ssize_t size,
                            uint8_t prefix, uint8_t *out) {
  uint8_t buf[MAX_MESSAGE + 2 * RATE];
  Py_ssize_t len = size + 1;
  Py_ssize_t padded = (len / RATE + 1) * RATE;
  for (Py_ssize_t m = 0; m < count; m++) {
    uint64_t st[25] = {0};
    buf[0] = prefix;
    memcpy(buf + 1, data + m * size, (size_t)size);
    memset(buf + len, 0, (size_t)(padded - len));
    buf[len] |= 0x01;
    buf[padded - 1] |= 0x80;
    for (Py_ssize_t off = 0; off < padded; off += RATE) {
      for (int i = 0; i < RATE / 8; i++) st[i] ^= load64(buf + off + 8 * i);
      keccakf(st);
    }
    for (int i = 0; i < 4; i++)
      for (int b = 0; b < 8; b++) out[32 * m + 8 * i + b] = (uint8_t)(st[i] >> (8 * b));
  }
}

PyDoc_STRVAR(hash_into_doc,
             "hash_into(data, size, prefix, out)\n--\n\n"
             "Write keccak256(prefix || message) of each `size`-byte message of the contiguous\n"
             "buffer `data` into the writable buffer `out` (32 bytes per message), without the GIL.\n"
             "ValueError: size outside 1..4096, not dividing len(data), or out of the wrong length.");

static PyObject *hash_into(PyObject *self, PyObject *args) {
  Py_buffer data, out;
  Py_ssize_t size;
  unsigned char prefix;
  (void)self;
  if (!PyArg_ParseTuple(args, "y*nbw*", &data, &size, &prefix, &out)) return NULL;
  PyObject *result = NULL;
  if (size <= 0 || size > MAX_MESSAGE) {
    PyErr_Format(PyExc_ValueError, "message size %zd is outside 1..%d", size, MAX_MESSAGE);
  } else if (data.len % size) {
    PyErr_Format(PyExc_ValueError, "message size %zd does not divide %zd bytes", size, data.len);
  } else if (out.len != 32 * (data.len / size)) {
    PyErr_Format(PyExc_ValueError, "out holds %zd bytes, %zd messages need %zd", out.len,
                 data.len / size, 32 * (data.len / size));
  } else {
    Py_BEGIN_ALLOW_THREADS
    keccak256_batch((const uint8_t *)data.buf, data.len / size, size, prefix, (uint8_t *)out.buf);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
  }
  PyBuffer_Release(&data);
  PyBuffer_Release(&out);
  return result;
}

static PyMethodDef methods[] = {
    {"hash_into", hash_into, METH_VARARGS, hash_into_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "unchained_keccak", "Batched keccak256 without the GIL (see keccak_native).", -1,
    methods,
};

PyMODINIT_FUNC PyInit_unchained_keccak(void) {
  PyObject *m = PyModule_Create(&module);
  if (m != NULL && PyModule_AddIntConstant(m, "MAX_MESSAGE", MAX_MESSAGE) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
