/*
 * Hostile checkpoint files (dtr_checkpoint_open): each one refused with its status and a
 * detail naming what is wrong, the output never written, no crash (ASan runs this too).
 * One table row per kind of damage; the fuzzer (fuzz/fuzz_safetensors.c) throws the rest.
 */
#include "tests/checkpoint/fixture.h"

#include "checkpoint/dtr_checkpoint.h"
#include "dtr.h"

typedef struct {
    const char *what;
    const char *json;
    int64_t len;     /* the header length written; -1: the JSON's own */
    size_t data_len; /* bytes of data after the header */
    dtr_status_t status;
    const char *detail; /* a part of dtr_last_error() */
} hostile_t;

#define T1(dt, shape, b, e) "{\"t\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}}"

static const hostile_t table[] = {
    {"header length past the end", T1("F32", "[1]", 0, 4), 1000, 4, DTR_ERR_PARSE,
     "header length 1000 past the end of the file"},
    {"huge header length", T1("F32", "[1]", 0, 4), (int64_t)1 << 40, 4, DTR_ERR_PARSE,
     "header length 1099511627776 past the end"},
    {"malformed JSON", "{\"t\": {\"dtype\": ", -1, 0, DTR_ERR_PARSE, "header: not JSON at byte"},
    {"JSON not an object", "[1, 2]", -1, 0, DTR_ERR_PARSE, "header: not a JSON object"},
    {"trailing garbage after the object", "{} x", -1, 0, DTR_ERR_PARSE, "not JSON"},
    {"unknown dtype", T1("F17", "[1]", 0, 4), -1, 4, DTR_ERR_PARSE, "tensor 't': unknown dtype 'F17'"},
    {"shape x dtype not the byte count", T1("F32", "[2]", 0, 4), -1, 4, DTR_ERR_PARSE,
     "tensor 't': shape x F32 is 8 bytes, data_offsets [0, 4) hold 4"},
    {"offsets outside the data", T1("F32", "[2]", 0, 8), -1, 4, DTR_ERR_PARSE,
     "tensor 't': data_offsets [0, 8) outside the data (4 bytes)"},
    {"offsets reversed", T1("F32", "[1]", 4, 0), -1, 4, DTR_ERR_PARSE,
     "data_offsets is not [begin, end]"},
    {"offsets negative", T1("F32", "[1]", -4, 0), -1, 4, DTR_ERR_PARSE,
     "data_offsets is not [begin, end]"},
    {"overlapping tensors",
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", -1, 12, DTR_ERR_PARSE,
     "tensor 'b' [4, 12) overlaps tensor 'a' (ending at 8)"},
    {"a gap between tensors",
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", -1, 12, DTR_ERR_PARSE,
     "bytes [4, 8) of the data belong to no tensor"},
    {"data past the last tensor", T1("F32", "[1]", 0, 4), -1, 8, DTR_ERR_PARSE,
     "the data has 8 bytes, the tensors end at 4"},
    {"duplicate names",
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", -1, 8, DTR_ERR_PARSE,
     "duplicate object key"},
    {"unknown key in a tensor",
     "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", -1, 4,
     DTR_ERR_PARSE, "tensor 't': unknown key 'x'"},
    {"missing data_offsets", "{\"t\":{\"dtype\":\"F32\",\"shape\":[1]}}", -1, 4, DTR_ERR_PARSE,
     "tensor 't': needs \"dtype\""},
    {"tensor not an object", "{\"t\": 3}", -1, 0, DTR_ERR_PARSE, "tensor 't': not an object"},
    {"negative length", T1("F32", "[-1]", 0, 4), -1, 4, DTR_ERR_PARSE,
     "tensor 't': shape[0] is not a length"},
    {"fractional length", T1("F32", "[1.5]", 0, 4), -1, 4, DTR_ERR_PARSE,
     "tensor 't': shape[0] is not a length"},
    {"length past 2^40", T1("U8", "[2199023255552]", 0, 4), -1, 4, DTR_ERR_PARSE,
     "shape[0] is not a length 0..2^40"},
    {"shape overflowing 64 bits", T1("F64", "[1099511627776,1099511627776]", 0, 4), -1, 4,
     DTR_ERR_PARSE, "tensor 't': shape too large"},
    {"nine dims", T1("F32", "[1,1,1,1,1,1,1,1,1]", 0, 4), -1, 4, DTR_ERR_UNSUPPORTED,
     "tensor 't': 9 dims, dtr takes at most 8"},
    {"sub-byte elements not whole bytes", T1("F4", "[3]", 0, 1), -1, 1, DTR_ERR_PARSE,
     "3 elements of F4 are not whole bytes"},
    {"metadata not strings", "{\"__metadata__\":{\"k\":1}}", -1, 0, DTR_ERR_PARSE,
     "__metadata__: 'k' is not a string"},
    {"metadata not an object", "{\"__metadata__\":[]}", -1, 0, DTR_ERR_PARSE,
     "__metadata__: not an object"},
    {"a NUL inside a name", "{\"a\\u0000b\":{}}", -1, 0, DTR_ERR_PARSE, "not JSON"},
};

Test(hostile, each_file_refused_by_name) {
    char *dir = fixture_dir();
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const hostile_t *h = &table[i];
        char name[32];
        snprintf(name, sizeof name, "h%zu.safetensors", i);
        char *path = fixture_file(dir, name, h->json, h->len, NULL, h->data_len);
        dtr_checkpoint_t *ck = (dtr_checkpoint_t *)(uintptr_t)0x5a5a;
        dtr_status_t st = dtr_checkpoint_open(path, &ck);
        cr_expect(st == h->status && strstr(dtr_last_error(), h->detail) != NULL &&
                      strstr(dtr_last_error(), path) != NULL &&
                      ck == (dtr_checkpoint_t *)(uintptr_t)0x5a5a,
                  "%s: status %s, detail '%s' (want %s, '%s', the path, *out untouched)",
                  h->what, dtr_status_name(st), dtr_last_error(), dtr_status_name(h->status),
                  h->detail);
        free(path);
    }
}

Test(hostile, short_files_and_paths) {
    char *dir = fixture_dir();
    dtr_checkpoint_t *ck = NULL;
    char *p = fixture_raw(dir, "short.safetensors", "\x05\0\0", 3);
    cr_expect_eq(dtr_checkpoint_open(p, &ck), DTR_ERR_PARSE);
    cr_expect(strstr(dtr_last_error(), "3 bytes, shorter than the 8-byte header length"),
              "%s", dtr_last_error());
    free(p);
    p = fixture_raw(dir, "empty.safetensors", "", 0);
    cr_expect_eq(dtr_checkpoint_open(p, &ck), DTR_ERR_PARSE);
    free(p);
    cr_expect_eq(dtr_checkpoint_open("/nonexistent/x.safetensors", &ck), DTR_ERR_IO);
    cr_expect(strstr(dtr_last_error(), "/nonexistent/x.safetensors: No such file or directory"),
              "%s", dtr_last_error());
    cr_expect_eq(dtr_checkpoint_open(NULL, &ck), DTR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(dtr_last_error(), "path: must not be NULL"), "%s", dtr_last_error());
    cr_expect_eq(dtr_checkpoint_open(dir, NULL), DTR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(dtr_checkpoint_open(dir, &ck), DTR_ERR_PARSE); /* its two files, hostile */
    cr_expect(ck == NULL);
    char *empty = fixture_dir();
    cr_expect_eq(dtr_checkpoint_open(empty, &ck), DTR_ERR_IO);
    cr_expect(strstr(dtr_last_error(), "no .safetensors file and no model.safetensors.index.json"),
              "%s", dtr_last_error());
}

/* Directories: a name in two files; indexes that disagree with their files. */
Test(hostile, directories_and_indexes) {
    static const char *one = T1("F32", "[1]", 0, 4);
    dtr_checkpoint_t *ck = NULL;
    char *dir = fixture_dir();
    free(fixture_file(dir, "a.safetensors", one, -1, NULL, 4));
    free(fixture_file(dir, "b.safetensors", one, -1, NULL, 4));
    cr_expect_eq(dtr_checkpoint_open(dir, &ck), DTR_ERR_PARSE);
    cr_expect(strstr(dtr_last_error(), "tensor 't' is in ") &&
                  strstr(dtr_last_error(), "/a.safetensors and in ") &&
                  strstr(dtr_last_error(), "/b.safetensors"),
              "%s", dtr_last_error());
    static const struct {
        const char *index, *detail;
    } bad[] = {
        {"{\"weight_map\": {\"t\": \"a.safetensors\", \"u\": \"a.safetensors\"}}",
         "tensor 'u': a.safetensors does not hold it"},
        {"{\"weight_map\": {\"t\": \"../a.safetensors\"}}",
         "weight_map: tensor 't': not a file name of this directory"},
        {"{\"weight_map\": {\"t\": \"none.safetensors\"}}", "none.safetensors: No such file"},
        {"{\"metadata\": 3, \"weight_map\": {}}", "\"metadata\" is not an object"},
        {"{\"weights\": {}}", "no \"weight_map\" object"},
        {"{\"weight_map\": {\"t\": \"a.safetensors\", \"t\": \"a.safetensors\"}}",
         "duplicate object key"},
        {"{\"weight_map\": ", "line 1, column"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *d = fixture_dir();
        free(fixture_file(d, "a.safetensors", one, -1, NULL, 4));
        free(fixture_raw(d, "model.safetensors.index.json", bad[i].index, strlen(bad[i].index)));
        ck = NULL;
        dtr_status_t st = dtr_checkpoint_open(d, &ck);
        cr_expect(st != DTR_OK && ck == NULL && strstr(dtr_last_error(), bad[i].detail),
                  "index %zu: %s: '%s' (want '%s')", i, dtr_status_name(st), dtr_last_error(),
                  bad[i].detail);
    }
    /* the index puts a tensor in the wrong file */
    char *d = fixture_dir();
    free(fixture_file(d, "a.safetensors",
                      "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"u\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                      -1, NULL, 8));
    free(fixture_file(d, "b.safetensors", T1("F32", "[1]", 0, 4), -1, NULL, 4));
    static const char *wrong =
        "{\"weight_map\": {\"t\": \"a.safetensors\", \"u\": \"b.safetensors\"}}";
    free(fixture_raw(d, "model.safetensors.index.json", wrong, strlen(wrong)));
    cr_expect_eq(dtr_checkpoint_open(d, &ck), DTR_ERR_PARSE);
    cr_expect(strstr(dtr_last_error(), "the index puts tensor 'u' in b.safetensors; ") &&
                  strstr(dtr_last_error(), "/a.safetensors holds it"),
              "%s", dtr_last_error());
}
