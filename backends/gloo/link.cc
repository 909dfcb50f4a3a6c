// The Gloo backend's C++ side (link.h): stores, the TCP device, connected contexts and
// posted transfers. Every Gloo call is inside a try block; what Gloo throws comes back as a
// status and its message, so no exception crosses into C.
#include "backends/gloo/link.h"

#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// The caller's key-value store (dtr_gloo_store_t) as a Gloo store: get blocks until the key
// is set, as PyTorch's c10d stores do, so wait is a get of each key.
class CallbackStore : public gloo::rendezvous::Store {
  public:
    explicit CallbackStore(const dtr_gloo_store_t &cb) : cb_(cb) {}

    void set(const std::string &key, const std::vector<char> &data) override {
        if (cb_.set(cb_.user, key.c_str(), data.data(), data.size()) != 0)
            throw std::runtime_error("the store's set callback failed for key '" + key + "'");
    }

    std::vector<char> get(const std::string &key) override {
        std::vector<char> buf(256);
        for (;;) {
            size_t n = 0;
            if (cb_.get(cb_.user, key.c_str(), buf.data(), buf.size(), &n) != 0)
                throw std::runtime_error("the store's get callback failed for key '" + key +
                                         "'");
            if (n <= buf.size()) {
                buf.resize(n);
                return buf;
            }
            buf.resize(n);
        }
    }

    void wait(const std::vector<std::string> &keys) override {
        for (const auto &k : keys) get(k);
    }

    void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &) override {
        wait(keys);
    }

  private:
    dtr_gloo_store_t cb_;
};

// A store whose waits without a timeout take the context's: Gloo's rendezvous waits for its
// peers' keys with the stores' default of 30 s otherwise, whatever the context's deadline.
class TimedStore : public gloo::rendezvous::Store {
  public:
    TimedStore(gloo::rendezvous::Store &s, std::chrono::milliseconds t) : s_(s), t_(t) {}

    void set(const std::string &key, const std::vector<char> &data) override { s_.set(key, data); }

    std::vector<char> get(const std::string &key) override {
        s_.wait({key}, t_);
        return s_.get(key);
    }

    void wait(const std::vector<std::string> &keys) override { s_.wait(keys, t_); }

    void wait(const std::vector<std::string> &keys,
              const std::chrono::milliseconds &t) override {
        s_.wait(keys, t);
    }

  private:
    gloo::rendezvous::Store &s_;
    std::chrono::milliseconds t_;
};

// Gloo's message into err; DTR__GLOO_TIMEOUT where Gloo says it timed out.
int fail(const std::exception &e, char *err, size_t len) {
    std::snprintf(err, len, "%s", e.what());
    bool timeout = std::strstr(e.what(), "Timed out") != nullptr ||
                   std::strstr(e.what(), "timed out") != nullptr ||
                   std::strstr(e.what(), "Wait timeout") != nullptr;
    return timeout ? DTR__GLOO_TIMEOUT : DTR__GLOO_FAIL;
}

} // namespace

struct dtr__gloo_store {
    std::unique_ptr<gloo::rendezvous::Store> store;
};

struct dtr__gloo_device {
    std::shared_ptr<gloo::transport::Device> dev;
};

struct dtr__gloo_link {
    std::shared_ptr<gloo::rendezvous::Context> ctx;
    std::chrono::milliseconds timeout;
};

struct dtr__gloo_xfer {
    std::unique_ptr<gloo::transport::UnboundBuffer> in, out;
    int nsend = 0, nrecv = 0;
    std::chrono::milliseconds timeout;
};

extern "C" {

int dtr__gloo_store_file(const char *dir, dtr__gloo_store_t **out, char *err, size_t len) {
    try {
        auto s = std::make_unique<dtr__gloo_store>();
        s->store = std::make_unique<gloo::rendezvous::FileStore>(dir);
        *out = s.release();
        return 0;
    } catch (const std::exception &e) {
        return fail(e, err, len);
    }
}

int dtr__gloo_store_user(const dtr_gloo_store_t *cb, dtr__gloo_store_t **out, char *err,
                         size_t len) {
    try {
        auto s = std::make_unique<dtr__gloo_store>();
        s->store = std::make_unique<CallbackStore>(*cb);
        *out = s.release();
        return 0;
    } catch (const std::exception &e) {
        return fail(e, err, len);
    }
}

void dtr__gloo_store_free(dtr__gloo_store_t *s) { delete s; }

int dtr__gloo_device_open(const char *hostname, const char *iface, dtr__gloo_device_t **out,
                     char *err, size_t len) {
    try {
        gloo::transport::tcp::attr attr;
        if (hostname != nullptr) attr.hostname = hostname;
        if (iface != nullptr) attr.iface = iface;
        auto d = std::make_unique<dtr__gloo_device>();
        d->dev = gloo::transport::tcp::CreateDevice(attr);
        *out = d.release();
        return 0;
    } catch (const std::exception &e) {
        return fail(e, err, len);
    }
}

void dtr__gloo_device_free(dtr__gloo_device_t *d) { delete d; }

int dtr__gloo_connect(dtr__gloo_store_t *s, dtr__gloo_device_t *d, const char *prefix, int rank,
                      int size, int64_t timeout_ms, dtr__gloo_link_t **out, char *err,
                      size_t len) {
    try {
        auto l = std::make_unique<dtr__gloo_link>();
        l->timeout = std::chrono::milliseconds(timeout_ms);
        l->ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
        l->ctx->setTimeout(l->timeout);
        gloo::rendezvous::PrefixStore keys(prefix, *s->store);
        TimedStore timed(keys, l->timeout);
        l->ctx->connectFullMesh(timed, d->dev);
        *out = l.release();
        return 0;
    } catch (const std::exception &e) {
        return fail(e, err, len);
    }
}

void dtr__gloo_link_free(dtr__gloo_link_t *l) { delete l; }

int dtr__gloo_post(dtr__gloo_link_t *l, uint32_t tag, const void *send, const int64_t *sdispl,
                   const int64_t *scount, void *recv, const int64_t *rdispl,
                   const int64_t *rcount, dtr__gloo_xfer_t **out, char *err, size_t len) {
    *out = nullptr;
    try {
        const int me = l->ctx->rank, n = l->ctx->size;
        int64_t sbytes = 0, rbytes = 0;
        int nsend = 0, nrecv = 0;
        for (int p = 0; p < n; p++) {
            if (p == me) continue;
            if (scount[p] > 0) {
                nsend++;
                sbytes = std::max(sbytes, sdispl[p] + scount[p]);
            }
            if (rcount[p] > 0) {
                nrecv++;
                rbytes = std::max(rbytes, rdispl[p] + rcount[p]);
            }
        }
        if (nsend == 0 && nrecv == 0) return 0;
        auto x = std::make_unique<dtr__gloo_xfer>();
        x->timeout = l->timeout;
        const uint64_t slot = gloo::Slot::build(0x64, tag);
        // Receives are posted first, so that no peer's send waits on an unposted receive.
        if (nrecv > 0) x->out = l->ctx->createUnboundBuffer(recv, (size_t)rbytes);
        for (int p = 0; p < n; p++)
            if (p != me && rcount[p] > 0) {
                x->out->recv(p, slot, (size_t)rdispl[p], (size_t)rcount[p]);
                x->nrecv++;
            }
        // Gloo's send only reads the buffer; its interface takes void *.
        if (nsend > 0) x->in = l->ctx->createUnboundBuffer(const_cast<void *>(send), (size_t)sbytes);
        for (int p = 0; p < n; p++)
            if (p != me && scount[p] > 0) {
                x->in->send(p, slot, (size_t)sdispl[p], (size_t)scount[p]);
                x->nsend++;
            }
        *out = x.release();
        return 0;
    } catch (const std::exception &e) {
        return fail(e, err, len);
    }
}

int dtr__gloo_finish(dtr__gloo_xfer_t *x, char *err, size_t len) {
    if (x == nullptr) return 0;
    std::unique_ptr<dtr__gloo_xfer> own(x);
    try {
        for (; x->nrecv > 0; x->nrecv--)
            if (!x->out->waitRecv(nullptr, x->timeout))
                throw std::runtime_error("a receive was aborted");
        for (; x->nsend > 0; x->nsend--)
            if (!x->in->waitSend(nullptr, x->timeout))
                throw std::runtime_error("a send was aborted");
        return 0;
    } catch (const std::exception &e) {
        return fail(e, err, len);
    }
}

} // extern "C"
