/* The `shoal` backend of torch.distributed: a c10d::ProcessGroup whose every
 * operation is one non-blocking request of libshoal (include/shoal/request.h).
 *
 * Kept thin on purpose: the collectives, their algorithms, deadlines, dead-peer
 * detection and error messages are the C library's. What lives here is the
 * glue torch needs and C cannot give: turning tensors into (pointer, count,
 * dtype) (a contiguous staging copy for a non-contiguous tensor or a list of
 * tensors, copied back once the request completes), torch's ReduceOp into
 * shoal's, and each request into a c10d::Work with a Future, completed by one
 * thread of this group when libshoal reports the request done
 * (shoal_request_notify), in the order the requests complete.
 *
 * Rendezvous: rank 0 of the group starts shoal's own store on an ephemeral
 * port and publishes "address port token" under the key "shoal" of the store
 * torch gives the group (env://, tcp://, a FileStore ...); the other ranks read
 * it there and join. Each group is its own shoal world (own connections and
 * progress thread), as each Gloo group has its own pairs: operations of
 * different groups never wait for each other. */
#include <torch/extension.h>

#include <pybind11/chrono.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

#include "shoal/comm.h"
#include "shoal/request.h"

namespace shoal_torch {

using c10d::OpType;
using c10d::ReduceOp;

[[noreturn]] static void fail(const char *op, const std::string &why) {
  throw std::runtime_error(std::string("shoal: ") + op + ": " + why);
}

/* ---- tensors -> (dtype, count) ---- */

/* How a tensor's elements travel: shoal's dtype and how many of its elements one torch element is. */
struct Wire {
  shoal_dtype_t dtype;
  int64_t per_elem;
  bool is_bool, is_complex;
};

static Wire wire_of(const at::Tensor &t, const char *op) {
  switch (t.scalar_type()) {
  case at::kFloat: return {SHOAL_FLOAT32, 1, false, false};
  case at::kDouble: return {SHOAL_FLOAT64, 1, false, false};
  case at::kHalf: return {SHOAL_FLOAT16, 1, false, false};
  case at::kBFloat16: return {SHOAL_BFLOAT16, 1, false, false};
  case at::kInt: return {SHOAL_INT32, 1, false, false};
  case at::kLong: return {SHOAL_INT64, 1, false, false};
  case at::kShort: return {SHOAL_INT16, 1, false, false};
  case at::kChar: return {SHOAL_INT8, 1, false, false};
  case at::kByte: return {SHOAL_UINT8, 1, false, false};
  case at::kBool: return {SHOAL_UINT8, 1, true, false}; /* 0/1 bytes */
  case at::kComplexFloat: return {SHOAL_FLOAT32, 2, false, true};
  case at::kComplexDouble: return {SHOAL_FLOAT64, 2, false, true};
  case at::kComplexHalf: return {SHOAL_FLOAT16, 2, false, true};
  default: fail(op, std::string("dtype ") + c10::toString(t.scalar_type()) + " is not supported");
  }
}

static void check_tensor(const at::Tensor &t, const char *op) {
  if (t.is_sparse())
    fail(op, "sparse tensors are not supported (convert with .to_dense(), or use the gloo backend, which reduces "
             "sparse tensors)");
  if (!t.device().is_cpu())
    fail(op, "tensor on " + t.device().str() + ": the shoal backend works on CPU tensors");
  if (t.layout() != c10::kStrided) fail(op, "only strided (dense) tensors are supported");
}

static const at::Tensor &single(const std::vector<at::Tensor> &ts, const char *op) {
  if (ts.size() != 1) fail(op, "expects one tensor per process, got " + std::to_string(ts.size()));
  check_tensor(ts[0], op);
  return ts[0];
}

/* Every tensor CPU/dense, of t0's dtype and number of elements. */
static void check_like(const std::vector<at::Tensor> &ts, const at::Tensor &t0, const char *op, const char *what) {
  for (const auto &t : ts) {
    check_tensor(t, op);
    if (t.scalar_type() != t0.scalar_type() || t.numel() != t0.numel())
      fail(op, std::string(what) + ": every tensor must have the input's dtype " + c10::toString(t0.scalar_type()) +
                   " and " + std::to_string(t0.numel()) + " elements, got " + c10::toString(t.scalar_type()) +
                   " with " + std::to_string(t.numel()));
  }
}

/* A root or peer in range, checked here: libshoal would abort the group for it (an argument error there
 * is every rank's error), torch's other backends raise on the caller's rank only. */
static int rank_in(int64_t r, int size, const char *op, const char *what) {
  if (r < 0 || r >= size)
    fail(op, std::string(what) + " " + std::to_string(r) + " out of range (group of " + std::to_string(size) + ")");
  return (int)r;
}

static size_t count_of(const at::Tensor &t, const Wire &w) { return (size_t)(t.numel() * w.per_elem); }

/* t's elements in one contiguous block: t itself, or a copy (written back by `back` when t is an output). */
static at::Tensor dense(const at::Tensor &t) { return t.is_contiguous() ? t : t.contiguous(); }

static shoal_redop_t redop_of(const ReduceOp &rop, const Wire &w, const char *op) {
  shoal_redop_t r;
  switch (rop.op_) {
  case ReduceOp::SUM: r = SHOAL_SUM; break;
  case ReduceOp::AVG: r = SHOAL_AVG; break;
  case ReduceOp::PRODUCT: r = SHOAL_PROD; break;
  case ReduceOp::MIN: r = SHOAL_MIN; break;
  case ReduceOp::MAX: r = SHOAL_MAX; break;
  case ReduceOp::BAND: r = SHOAL_BAND; break;
  case ReduceOp::BOR: r = SHOAL_BOR; break;
  case ReduceOp::BXOR: r = SHOAL_BXOR; break;
  default: fail(op, "ReduceOp.PREMUL_SUM is not supported (multiply before a SUM instead)");
  }
  if (w.is_bool) { /* as NCCL: sum and max are a logical or, product and min a logical and */
    if (r == SHOAL_AVG) fail(op, "ReduceOp.AVG is not defined on bool tensors");
    if (r == SHOAL_SUM || r == SHOAL_MAX) r = SHOAL_BOR;
    if (r == SHOAL_PROD || r == SHOAL_MIN) r = SHOAL_BAND;
  }
  if (w.is_complex && r != SHOAL_SUM && r != SHOAL_AVG)
    fail(op, std::string("ReduceOp.") + shoal_redop_name(r) + " is not defined on complex tensors (SUM and AVG are)");
  if (shoal_redop_supported(w.dtype, r)) fail(op, std::string("ReduceOp: ") + shoal_last_error());
  return r;
}

/* ---- work ---- */

class ProcessGroupShoal;

class ShoalWork : public c10d::Work {
 public:
  ShoalWork(ProcessGroupShoal *pg, int rank, OpType type, const char *name, std::vector<at::Tensor> outputs)
      : c10d::Work(rank, type), pg_(pg), name_(name), outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors())) {}

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::vector<at::Tensor> result() override { return outputs_; }

  /* A caller that waits without a timeout of its own (dist.all_reduce without async_op, work.wait())
   * completes the work on its thread (shoal_wait runs the request there when no thread has started it),
   * and the group's completion thread is not woken for it (see handed_off). With a timeout, the wait is
   * c10d's (the request keeps the group's deadline either way). */
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;

  /* libshoal's notification, on the thread that ran the request. A waiter that claimed the work completes
   * it: the first of this notification and the waiter's return leaves the completion thread's reference
   * to the second, and the second releases it (the waiter) or hands it to the completion thread (here: it
   * must not run a work's destructor, whose Python callbacks need the GIL). True: handed off here. */
  bool handed_off() { return claimed_.load() && handoff_.fetch_add(1) == 0; }

  /* Once, by the first of the waiting caller and the group's completion thread: the request's status
   * (waiting for it), the copies back, then the future and the work. */
  void complete() {
    if (claimed_.exchange(true)) return;
    int rc = shoal_wait(&req);
    std::exception_ptr err;
    if (rc) {
      err = std::make_exception_ptr(std::runtime_error(std::string("shoal: ") + name_ + ": " + shoal_last_error()));
    } else {
      try {
        if (back) back();
      } catch (...) {
        err = std::current_exception();
      }
    }
    keep.clear();
    back = nullptr;
    if (err)
      future_->setError(err);
    else
      future_->markCompleted(c10::IValue(outputs_));
    finish(err);
  }

  ProcessGroupShoal *pg_;
  shoal_request_t *req = nullptr;
  std::vector<at::Tensor> keep; /* what the request reads or writes (inputs, staging buffers) */
  std::function<void()> back;   /* after success: staging copied into the caller's tensors */

 private:
  const char *name_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::atomic<bool> claimed_{false};

 public:
  std::atomic<int> handoff_{0};
};

/* ---- the process group ---- */

class ProcessGroupShoal : public c10d::ProcessGroup {
 public:
  ProcessGroupShoal(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                    std::chrono::milliseconds timeout, const std::string &addr)
      : c10d::ProcessGroup(rank, size) {
    join(store, timeout, addr);
    completer_ = std::thread([this] { run_completions(); });
  }

  ~ProcessGroupShoal() override {
    /* the completions may run Python callbacks: never wait for them holding the GIL */
    std::unique_ptr<py::gil_scoped_release> nogil;
    if (Py_IsInitialized() && PyGILState_Check()) nogil = std::make_unique<py::gil_scoped_release>();
    {
      std::unique_lock<std::mutex> lk(mu_);
      drained_.wait(lk, [this] { return inflight_ == 0; }); /* every request has its deadline */
      stop_ = true;
    }
    ready_.notify_all();
    completer_.join();
    shoal_comm_destroy(comm_);
  }

  const std::string getBackendName() const override { return "shoal"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &ts, const c10d::BroadcastOptions &o) override {
    const char *op = "broadcast";
    const at::Tensor &t = single(ts, op);
    Wire w = wire_of(t, op);
    auto work = make(OpType::BROADCAST, op, ts);
    at::Tensor buf = dense(t);
    output(*work, t, buf);
    return issue(work, op, shoal_ibroadcast(comm_, buf.data_ptr(), count_of(t, w), w.dtype,
                                           rank_in(o.rootRank, getSize(), op, "root"), &work->req));
  }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &ts, const c10d::AllreduceOptions &o) override {
    const char *op = "all_reduce";
    const at::Tensor &t = single(ts, op);
    Wire w = wire_of(t, op);
    shoal_redop_t r = redop_of(o.reduceOp, w, op);
    auto work = make(OpType::ALLREDUCE, op, ts);
    at::Tensor buf = dense(t);
    output(*work, t, buf);
    return issue(work, op,
                 shoal_iallreduce(comm_, SHOAL_IN_PLACE, buf.data_ptr(), count_of(t, w), w.dtype, r, &work->req));
  }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor> &ts,
                                                      const c10d::AllreduceCoalescedOptions &o) override {
    const char *op = "all_reduce_coalesced";
    if (ts.empty()) fail(op, "no tensors");
    Wire w = wire_of(ts[0], op);
    for (const auto &t : ts) {
      check_tensor(t, op);
      if (t.scalar_type() != ts[0].scalar_type()) fail(op, "the tensors must share one dtype");
    }
    shoal_redop_t r = redop_of(o.reduceOp, w, op);
    auto work = make(OpType::ALLREDUCE_COALESCED, op, ts);
    at::Tensor flat = flatten(ts);
    work->keep.push_back(flat);
    work->back = [ts, flat] { unflatten(flat, ts); };
    return issue(work, op,
                 shoal_iallreduce(comm_, SHOAL_IN_PLACE, flat.data_ptr(), count_of(flat, w), w.dtype, r, &work->req));
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &ts, const c10d::ReduceOptions &o) override {
    const char *op = "reduce";
    const at::Tensor &t = single(ts, op);
    rank_in(o.rootRank, getSize(), op, "root");
    Wire w = wire_of(t, op);
    shoal_redop_t r = redop_of(o.reduceOp, w, op);
    auto work = make(OpType::REDUCE, op, ts);
    at::Tensor buf = dense(t);
    if (o.rootRank == getRank()) output(*work, t, buf);
    work->keep.push_back(buf);
    return issue(work, op, shoal_ireduce(comm_, SHOAL_IN_PLACE, buf.data_ptr(), count_of(t, w), w.dtype, r,
                                         rank_in(o.rootRank, getSize(), op, "root"), &work->req));
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outs, std::vector<at::Tensor> &ins,
                                           const c10d::AllgatherOptions &) override {
    const char *op = "all_gather";
    const at::Tensor &t = single(ins, op);
    if (outs.size() != 1 || outs[0].size() != (size_t)getSize())
      fail(op, "expects one list of " + std::to_string(getSize()) + " output tensors");
    check_like(outs[0], t, op, "output list");
    Wire w = wire_of(t, op);
    auto work = make(OpType::ALLGATHER, op, outs[0]);
    at::Tensor in = dense(t), flat = at::empty({getSize() * t.numel()}, t.options());
    work->keep = {in, flat};
    auto dst = outs[0];
    work->back = [dst, flat] { unflatten(flat, dst); };
    return issue(work, op, shoal_iallgather(comm_, in.data_ptr(), flat.data_ptr(), count_of(t, w), w.dtype, &work->req));
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &out, at::Tensor &in,
                                                 const c10d::AllgatherOptions &) override {
    const char *op = "all_gather_into_tensor";
    check_tensor(in, op);
    check_tensor(out, op);
    if (out.scalar_type() != in.scalar_type() || out.numel() != in.numel() * getSize())
      fail(op, "the output must hold " + std::to_string(getSize()) + " x the input's " + std::to_string(in.numel()) +
                   " elements of its dtype");
    Wire w = wire_of(in, op);
    auto work = make(OpType::_ALLGATHER_BASE, op, {out});
    at::Tensor src = dense(in), dst = dense(out);
    work->keep.push_back(src);
    output(*work, out, dst);
    return issue(work, op, shoal_iallgather(comm_, src.data_ptr(), dst.data_ptr(), count_of(in, w), w.dtype, &work->req));
  }

  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>> &outs,
                                                     std::vector<at::Tensor> &ins,
                                                     const c10d::AllgatherOptions &) override {
    const char *op = "all_gather_coalesced";
    if (ins.empty() || outs.size() != (size_t)getSize()) fail(op, "expects one output list per rank");
    Wire w = wire_of(ins[0], op);
    for (size_t r = 0; r < outs.size(); r++) {
      if (outs[r].size() != ins.size()) fail(op, "every output list must match the input list");
      for (size_t i = 0; i < ins.size(); i++) check_like({outs[r][i]}, ins[i], op, "output list");
    }
    auto work = make(OpType::ALLGATHER_COALESCED, op, {});
    at::Tensor in = flatten(ins), flat = at::empty({getSize() * in.numel()}, in.options());
    work->keep = {in, flat};
    work->back = [outs, flat, n = in.numel()] {
      for (size_t r = 0; r < outs.size(); r++) unflatten(flat.narrow(0, (int64_t)r * n, n), outs[r]);
    };
    return issue(work, op, shoal_iallgather(comm_, in.data_ptr(), flat.data_ptr(), count_of(in, w), w.dtype, &work->req));
  }

  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outs, std::vector<at::Tensor> &ins,
                                        const c10d::GatherOptions &o) override {
    const char *op = "gather";
    const at::Tensor &t = single(ins, op);
    rank_in(o.rootRank, getSize(), op, "root");
    bool root = o.rootRank == getRank();
    if (root && (outs.size() != 1 || outs[0].size() != (size_t)getSize()))
      fail(op, "the root expects one list of " + std::to_string(getSize()) + " output tensors");
    if (!root && !outs.empty() && !outs[0].empty()) fail(op, "only the root takes output tensors");
    if (root) check_like(outs[0], t, op, "gather list");
    Wire w = wire_of(t, op);
    auto work = make(OpType::GATHER, op, root ? outs[0] : std::vector<at::Tensor>{});
    at::Tensor in = dense(t), flat;
    work->keep.push_back(in);
    if (root) {
      flat = at::empty({getSize() * t.numel()}, t.options());
      work->keep.push_back(flat);
      auto dst = outs[0];
      work->back = [dst, flat] { unflatten(flat, dst); };
    }
    return issue(work, op, shoal_igather(comm_, in.data_ptr(), root ? flat.data_ptr() : nullptr, count_of(t, w),
                                         w.dtype, (int)o.rootRank, &work->req));
  }

  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outs, std::vector<std::vector<at::Tensor>> &ins,
                                         const c10d::ScatterOptions &o) override {
    const char *op = "scatter";
    const at::Tensor &t = single(outs, op);
    rank_in(o.rootRank, getSize(), op, "root");
    bool root = o.rootRank == getRank();
    if (root && (ins.size() != 1 || ins[0].size() != (size_t)getSize()))
      fail(op, "the root expects one list of " + std::to_string(getSize()) + " input tensors");
    if (!root && !ins.empty() && !ins[0].empty()) fail(op, "only the root takes input tensors");
    if (root) check_like(ins[0], t, op, "scatter list");
    Wire w = wire_of(t, op);
    auto work = make(OpType::SCATTER, op, outs);
    at::Tensor flat, buf = dense(t);
    if (root) work->keep.push_back(flat = flatten(ins[0]));
    output(*work, t, buf);
    return issue(work, op, shoal_iscatter(comm_, root ? flat.data_ptr() : nullptr, buf.data_ptr(), count_of(t, w),
                                          w.dtype, (int)o.rootRank, &work->req));
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outs,
                                                std::vector<std::vector<at::Tensor>> &ins,
                                                const c10d::ReduceScatterOptions &o) override {
    const char *op = "reduce_scatter";
    const at::Tensor &t = single(outs, op);
    if (ins.size() != 1 || ins[0].size() != (size_t)getSize())
      fail(op, "expects one list of " + std::to_string(getSize()) + " input tensors");
    check_like(ins[0], t, op, "input list");
    Wire w = wire_of(t, op);
    shoal_redop_t r = redop_of(o.reduceOp, w, op);
    auto work = make(OpType::REDUCE_SCATTER, op, outs);
    at::Tensor flat = flatten(ins[0]), buf = dense(t);
    work->keep.push_back(flat);
    output(*work, t, buf);
    return issue(work, op, shoal_ireduce_scatter(comm_, flat.data_ptr(), buf.data_ptr(), count_of(t, w), w.dtype, r,
                                                 &work->req));
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor &out, at::Tensor &in,
                                                      const c10d::ReduceScatterOptions &o) override {
    const char *op = "reduce_scatter_tensor";
    check_tensor(in, op);
    check_tensor(out, op);
    if (out.scalar_type() != in.scalar_type() || in.numel() != out.numel() * getSize())
      fail(op, "the input must hold " + std::to_string(getSize()) + " x the output's " + std::to_string(out.numel()) +
                   " elements of its dtype");
    Wire w = wire_of(out, op);
    shoal_redop_t r = redop_of(o.reduceOp, w, op);
    auto work = make(OpType::_REDUCE_SCATTER_BASE, op, {out});
    at::Tensor src = dense(in), dst = dense(out);
    work->keep.push_back(src);
    output(*work, out, dst);
    return issue(work, op, shoal_ireduce_scatter(comm_, src.data_ptr(), dst.data_ptr(), count_of(out, w), w.dtype, r,
                                                 &work->req));
  }

  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &out, at::Tensor &in, std::vector<int64_t> &out_splits,
                                               std::vector<int64_t> &in_splits,
                                               const c10d::AllToAllOptions &) override {
    const char *op = "all_to_all_single";
    check_tensor(in, op);
    check_tensor(out, op);
    if (out.scalar_type() != in.scalar_type()) fail(op, "input and output dtypes differ");
    Wire w = wire_of(in, op);
    auto work = make(OpType::ALLTOALL_BASE, op, {out});
    at::Tensor src = dense(in), dst = dense(out);
    work->keep.push_back(src);
    output(*work, out, dst);
    std::vector<size_t> v = splits(in, in_splits, w, op, "input");
    std::vector<size_t> rv = splits(out, out_splits, w, op, "output");
    v.insert(v.end(), rv.begin(), rv.end());
    size_t p = (size_t)getSize();
    return issue(work, op, shoal_ialltoallv(comm_, src.data_ptr(), v.data(), v.data() + p, dst.data_ptr(),
                                            v.data() + 2 * p, v.data() + 3 * p, w.dtype, &work->req));
  }

  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outs, std::vector<at::Tensor> &ins,
                                          const c10d::AllToAllOptions &) override {
    const char *op = "all_to_all";
    size_t p = (size_t)getSize();
    if (outs.size() != p || ins.size() != p) fail(op, "expects " + std::to_string(p) + " input and output tensors");
    Wire w = wire_of(ins[0], op);
    for (size_t i = 0; i < p; i++) {
      check_tensor(ins[i], op);
      check_tensor(outs[i], op);
      if (ins[i].scalar_type() != ins[0].scalar_type() || outs[i].scalar_type() != ins[0].scalar_type())
        fail(op, "every tensor must have one dtype");
    }
    auto work = make(OpType::ALLTOALL, op, outs);
    at::Tensor src = flatten(ins), dst = flatten(outs, false);
    work->keep = {src, dst};
    work->back = [outs, dst] { unflatten(dst, outs); };
    std::vector<size_t> v(4 * p);
    for (size_t i = 0, so = 0, ro = 0; i < p; i++) {
      v[i] = count_of(ins[i], w), v[p + i] = so, so += v[i];
      v[2 * p + i] = count_of(outs[i], w), v[3 * p + i] = ro, ro += v[2 * p + i];
    }
    return issue(work, op, shoal_ialltoallv(comm_, src.data_ptr(), v.data(), v.data() + p, dst.data_ptr(),
                                            v.data() + 2 * p, v.data() + 3 * p, w.dtype, &work->req));
  }

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &ts, int dst, int tag) override {
    const char *op = "send";
    const at::Tensor &t = single(ts, op);
    Wire w = wire_of(t, op);
    auto work = make(OpType::SEND, op, ts);
    at::Tensor buf = dense(t);
    work->keep.push_back(buf);
    return issue(work, op, shoal_isend(comm_, buf.data_ptr(), count_of(t, w), w.dtype, rank_in(dst, getSize(), op, "dst"),
                                       tag, &work->req));
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &ts, int src, int tag) override {
    const char *op = "recv";
    const at::Tensor &t = single(ts, op);
    Wire w = wire_of(t, op);
    auto work = make(OpType::RECV, op, ts);
    at::Tensor buf = dense(t);
    output(*work, t, buf);
    return issue(work, op, shoal_irecv(comm_, buf.data_ptr(), count_of(t, w), w.dtype, rank_in(src, getSize(), op, "src"),
                                       tag, &work->req));
  }

  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &, int) override {
    fail("recv", "a receive from any source (src=None) is not supported: name the source rank");
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &) override {
    auto work = make(OpType::BARRIER, "barrier", {});
    return issue(work, "barrier", shoal_ibarrier(comm_, &work->req));
  }

  /* The shoal_comm_t of this group (for callers that want libshoal's own calls on it). */
  uintptr_t handle() const { return (uintptr_t)comm_; }

 private:
  void join(const c10::intrusive_ptr<c10d::Store> &store, std::chrono::milliseconds timeout, const std::string &addr);
  void run_completions();
  friend class ShoalWork;
  void done_with(ShoalWork *work);
  static void notified(void *arg);

  c10::intrusive_ptr<ShoalWork> make(OpType type, const char *name, std::vector<at::Tensor> outputs) {
    return c10::make_intrusive<ShoalWork>(this, getRank(), type, name, std::move(outputs));
  }

  /* buf holds t's elements for the request; when it is a copy, it is written back into t on success. */
  static void output(ShoalWork &work, const at::Tensor &t, const at::Tensor &buf) {
    work.keep.push_back(buf);
    if (!buf.is_same(t)) work.back = [t, buf] { t.copy_(buf); };
  }

  static at::Tensor flatten(const std::vector<at::Tensor> &ts, bool copy = true) {
    std::vector<at::Tensor> flat;
    int64_t n = 0;
    for (const auto &t : ts) n += t.numel();
    if (!copy) return at::empty({n}, ts.empty() ? at::TensorOptions() : ts[0].options());
    for (const auto &t : ts) flat.push_back(t.reshape({-1}));
    return at::cat(flat);
  }

  static void unflatten(const at::Tensor &flat, const std::vector<at::Tensor> &ts) {
    int64_t off = 0;
    for (const auto &t : ts) {
      t.copy_(flat.narrow(0, off, t.numel()).view(t.sizes()));
      off += t.numel();
    }
  }

  /* Elements per rank of an all_to_all_single side: equal blocks when no splits are given, else rows of dim 0. */
  std::vector<size_t> splits(const at::Tensor &t, const std::vector<int64_t> &s, const Wire &w, const char *op,
                             const char *side) const {
    size_t p = (size_t)getSize();
    std::vector<size_t> v(2 * p);
    int64_t row = t.dim() > 0 && t.size(0) > 0 ? t.numel() / t.size(0) : 0, total = 0;
    if (!s.empty() && s.size() != p) fail(op, std::string(side) + " split sizes must have one entry per rank");
    if (s.empty() && t.numel() % (int64_t)p) fail(op, std::string(side) + " tensor is not divisible by the world size");
    for (size_t i = 0; i < p; i++) {
      int64_t rows = s.empty() ? (t.dim() > 0 ? t.size(0) / (int64_t)p : 0) : s[i];
      if (rows < 0) fail(op, std::string(side) + " split sizes must not be negative");
      v[i] = (size_t)(rows * row * w.per_elem), v[p + i] = (size_t)(total * row * w.per_elem), total += rows;
    }
    if (t.dim() > 0 && total != t.size(0))
      fail(op, std::string(side) + " split sizes add up to " + std::to_string(total) + " rows, the tensor has " +
                   std::to_string(t.size(0)));
    return v;
  }

  /* After the shoal_i* call: its status; on success the work is handed to the completion thread. */
  c10::intrusive_ptr<c10d::Work> issue(const c10::intrusive_ptr<ShoalWork> &work, const char *op, int rc) {
    if (rc) fail(op, shoal_last_error());
    {
      std::lock_guard<std::mutex> lk(mu_);
      inflight_++;
    }
    c10::raw::intrusive_ptr::incref(work.get()); /* the completion thread's reference */
    shoal_request_notify(work->req, notified, work.get());
    return work;
  }

  shoal_comm_t *comm_ = nullptr;
  std::mutex mu_;
  std::condition_variable ready_, drained_;
  std::deque<ShoalWork *> done_;
  int inflight_ = 0;
  bool stop_ = false;
  std::thread completer_;
};

bool ShoalWork::wait(std::chrono::milliseconds timeout) {
  if (timeout == kNoTimeout) {
    complete();
    if (handoff_.fetch_add(1) == 1) pg_->done_with(this); /* the notification came first and left it here */
  }
  return c10d::Work::wait(timeout);
}

/* The completion thread's reference to work and its count in flight, released on the waiter's thread. */
void ProcessGroupShoal::done_with(ShoalWork *work) {
  c10::raw::intrusive_ptr::decref(work); /* never the last: the waiter's caller holds one */
  std::lock_guard<std::mutex> lk(mu_);
  if (--inflight_ == 0) drained_.notify_all();
}

void ProcessGroupShoal::notified(void *arg) { /* the thread that ran the request: hand over and return */
  auto *work = static_cast<ShoalWork *>(arg);
  if (work->handed_off()) return;
  ProcessGroupShoal *pg = work->pg_;
  {
    std::lock_guard<std::mutex> lk(pg->mu_);
    pg->done_.push_back(work);
  }
  pg->ready_.notify_one();
}

void ProcessGroupShoal::run_completions() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    ready_.wait(lk, [this] { return stop_ || !done_.empty(); });
    if (done_.empty()) return;
    auto work = c10::intrusive_ptr<ShoalWork>::reclaim(done_.front());
    done_.pop_front();
    lk.unlock();
    work->complete(); /* may run the future's callbacks (DDP's, a comm hook's); a no-op if a waiter did */
    work.reset();
    lk.lock();
    if (--inflight_ == 0) drained_.notify_all();
  }
}

static std::string random_token() {
  unsigned char b[16];
  std::ifstream f("/dev/urandom", std::ios::binary);
  if (!f.read(reinterpret_cast<char *>(b), sizeof b)) fail("init", "cannot read /dev/urandom for the group's token");
  static const char *hex = "0123456789abcdef";
  std::string s;
  for (unsigned char c : b) s += hex[c >> 4], s += hex[c & 15];
  return s;
}

struct Published {
  c10d::Store *store;
  std::string addr, token;
};

static void publish(int port, void *arg) { /* rank 0, inside shoal_comm_init, once its store listens */
  auto *p = static_cast<Published *>(arg);
  std::string v = p->addr + " " + std::to_string(port) + " " + p->token;
  p->store->set("shoal", std::vector<uint8_t>(v.begin(), v.end()));
}

void ProcessGroupShoal::join(const c10::intrusive_ptr<c10d::Store> &store, std::chrono::milliseconds timeout,
                             const std::string &addr) {
  shoal_comm_params_t prm;
  shoal_comm_params_init(&prm);
  prm.rank = getRank();
  prm.world_size = getSize();
  prm.timeout_s = prm.connect_timeout_s = timeout.count() / 1000.0;
  Published pub{store.get(), addr, ""};
  std::string host, token;
  if (getSize() > 1 && getRank() == 0) {
    pub.token = random_token();
    prm.master_addr = pub.addr.c_str();
    prm.master_port = 0; /* an ephemeral port, published through torch's store */
    prm.token = pub.token.c_str();
    prm.on_store_port = publish;
    prm.on_store_port_arg = &pub;
  } else if (getSize() > 1) {
    std::vector<uint8_t> v = store->get("shoal"); /* waits up to the store's timeout */
    std::istringstream in(std::string(v.begin(), v.end()));
    int port = -1;
    if (!(in >> host >> port >> token)) fail("init", "malformed rendezvous entry in torch's store");
    prm.master_addr = host.c_str();
    prm.master_port = port;
    prm.token = token.c_str();
  }
  int rc = shoal_comm_init(&prm, &comm_);
  if (rc) fail("init", std::string("rank ") + std::to_string(getRank()) + " of " + std::to_string(getSize()) + ": " +
                           shoal_last_error());
}

} // namespace shoal_torch

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using shoal_torch::ProcessGroupShoal;
  py::module::import("torch.distributed"); /* registers c10d::ProcessGroup with pybind11 */
  py::class_<ProcessGroupShoal, c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupShoal>>(m, "ProcessGroupShoal")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                       std::chrono::milliseconds timeout, const std::string &addr) {
             return c10::make_intrusive<ProcessGroupShoal>(store, rank, size, timeout, addr);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("addr"),
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("handle", &ProcessGroupShoal::handle);
}
