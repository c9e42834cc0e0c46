// Threads, threadgroups and SIMD groups for running MSL kernels on the CPU.
//
// Each GPU thread is a fiber with its own stack. A threadgroup's fibers run on one OS thread, one
// at a time, each until it waits (at a barrier or a SIMD-group shuffle) or returns; a wait is
// released when every thread it needs has arrived, and a pass that finds no fiber ready while
// some have not returned is a deadlock. Fibers are visited in a fresh random order on every pass,
// so a kernel that relies on the order threads happen to run in (a missing barrier) reads
// another's memory before it is written: threadgroup memory starts each group as NaN-like
// garbage. Threadgroups are spread over one OS thread per core.
//
// The context switch is a dozen lines of x86-64 assembly: glibc's swapcontext makes a system call
// per switch (it saves the signal mask) and made the whole check 10-40x slower.
#include <signal.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "tfd_exec.h"

// tfd_switch saves the callee-saved registers, MXCSR and the x87 control word on the current
// stack, stores the stack pointer in *save, and resumes the context whose stack pointer is to.
// tfd_fiber_start is where a new fiber's first switch returns to: it calls r13(r12).
extern "C" void tfd_switch(void** save, void* to);
extern "C" void tfd_fiber_start();
asm(R"(
	.text
	.globl tfd_switch
	.type tfd_switch, @function
tfd_switch:
	pushq %rbp
	pushq %rbx
	pushq %r12
	pushq %r13
	pushq %r14
	pushq %r15
	subq $8, %rsp
	stmxcsr (%rsp)
	fnstcw 4(%rsp)
	movq %rsp, (%rdi)
	movq %rsi, %rsp
	ldmxcsr (%rsp)
	fldcw 4(%rsp)
	addq $8, %rsp
	popq %r15
	popq %r14
	popq %r13
	popq %r12
	popq %rbx
	popq %rbp
	ret
	.size tfd_switch, .-tfd_switch

	.globl tfd_fiber_start
	.type tfd_fiber_start, @function
tfd_fiber_start:
	movq %r12, %rdi
	callq *%r13
	ud2
	.size tfd_fiber_start, .-tfd_fiber_start
)");

namespace tfd_exec {

const char* volatile current_kernel = "";

namespace {

constexpr int kWidth = 32;             // SIMD-group width of Apple GPUs
constexpr int kMaxThreads = 1024;      // per threadgroup
constexpr size_t kShared = 32 << 10;   // threadgroup memory of Apple GPUs
constexpr size_t kStack = 64 << 10;    // per fiber
constexpr size_t kPage = 4096;         // a guard page below each stack

enum class State { Ready, Barrier, Simd, Done, Stopped };

struct Worker;

struct Fiber {
	void* sp;
	State state;
	ThreadPos tp;
	int line;           // of the barrier or shuffle it waits at
	unsigned cas_tries; // for spurious_failure
	size_t decls;       // threadgroup declarations made
	size_t cursor;      // threadgroup bytes handed out
	Worker* w;
};

struct Simd {
	int size, arrived, done, line;
	unsigned vsize;
	unsigned src[kWidth];
	alignas(16) unsigned char in[kWidth][16];
	alignas(16) unsigned char out[kWidth][16];
};

// Worker is one OS thread's machinery, kept between launches: stacks, fibers, a group's state.
struct Worker {
	unsigned char* stacks = nullptr;
	void* sched_sp = nullptr;
	Fiber fibers[kMaxThreads];
	Simd simd[kMaxThreads / kWidth];
	alignas(64) unsigned char shared[kShared];
	std::vector<size_t> decl_sizes;
	std::vector<int> order;
	std::mt19937 rng;

	// The launch.
	const KernelInfo* k = nullptr;
	void* const* args = nullptr;
	int nthreads = 0;
	std::string error; // the first this worker met
	bool fatal = false;

	// The group.
	u3 group;
	int arrived = 0, done = 0, barrier_line = 0;
};

thread_local Fiber* cur = nullptr;
std::vector<std::unique_ptr<Worker>> pool;

std::string format(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* f, ...) {
	char buf[512];
	va_list ap;
	va_start(ap, f);
	vsnprintf(buf, sizeof buf, f, ap);
	va_end(ap);
	return buf;
}

void fail(Worker* w, const std::string& msg) {
	if (w->error.empty()) {
		w->error = format("threadgroup (%u,%u): ", w->group.x, w->group.y) + msg;
	}
}

// stop ends the calling fiber for good: the group is abandoned.
[[noreturn]] void stop(Fiber* f, const std::string& msg) {
	fail(f->w, msg);
	f->w->fatal = true;
	f->state = State::Stopped;
	tfd_switch(&f->sp, f->w->sched_sp);
	__builtin_unreachable();
}

void yield(Fiber* f) { tfd_switch(&f->sp, f->w->sched_sp); }

void release_barrier(Worker* w) {
	if (w->arrived == 0 || w->arrived + w->done < w->nthreads) {
		return;
	}
	if (w->done > 0) {
		fail(w, format("%d threads returned before the barrier at line %d that %d others reached (undefined in MSL)",
		               w->done, w->barrier_line, w->arrived));
	}
	for (int i = 0; i < w->nthreads; i++) {
		if (w->fibers[i].state == State::Barrier) {
			w->fibers[i].state = State::Ready;
		}
	}
	w->arrived = 0;
}

void release_simd(Worker* w, int g) {
	Simd& s = w->simd[g];
	if (s.arrived == 0 || s.arrived + s.done < s.size) {
		return;
	}
	Fiber* lanes = &w->fibers[g * kWidth];
	for (int l = 0; l < s.size; l++) {
		if (lanes[l].state != State::Simd) {
			continue;
		}
		unsigned from = s.src[l];
		if (from >= unsigned(s.size) || lanes[from].state == State::Done) {
			fail(w, format("lane %d of SIMD group %d reads lane %u at line %d, which %s", l, g, from, s.line,
			               from >= unsigned(s.size) ? "does not exist" : "returned"));
			memset(s.out[l], 0xff, sizeof s.out[l]);
		} else {
			memcpy(s.out[l], s.in[from], s.vsize);
		}
		lanes[l].state = State::Ready;
	}
	s.arrived = 0;
}

void fiber_main(Fiber* f) {
	Worker* w = f->w;
	w->k->thunk(w->args, f->tp);
	f->state = State::Done;
	w->done++;
	w->simd[f->tp.simd].done++;
	// A thread that returns may be the last one a wait was missing.
	release_simd(w, f->tp.simd);
	release_barrier(w);
	yield(f);
	__builtin_unreachable();
}

void start_fiber(Worker* w, int i) {
	Fiber& f = w->fibers[i];
	unsigned char* top = w->stacks + size_t(i + 1) * (kStack + kPage);
	uint64_t* sp = reinterpret_cast<uint64_t*>(top - 64); // top - 64 + 64 is 16-aligned at the call
	sp[0] = 0x1f80 | (uint64_t(0x037f) << 32);             // MXCSR and x87 control word defaults
	sp[1] = sp[2] = sp[5] = sp[6] = 0;                      // r15, r14, rbx, rbp
	sp[3] = reinterpret_cast<uint64_t>(&fiber_main);        // r13
	sp[4] = reinterpret_cast<uint64_t>(&f);                 // r12
	sp[7] = reinterpret_cast<uint64_t>(&tfd_fiber_start);   // the return address
	f.sp = sp;
	f.state = State::Ready;
	f.line = 0;
	f.cas_tries = 0;
	f.decls = 0;
	f.cursor = 0;
	f.w = w;
	f.tp.group = w->group;
	f.tp.local = u3{unsigned(i), 0, 0};
	f.tp.size = u3{unsigned(w->nthreads), 1, 1};
	f.tp.lane = unsigned(i % kWidth);
	f.tp.simd = unsigned(i / kWidth);
}

// describe lists what the threads of a group wait for, in runs of equal state.
std::string describe(Worker* w) {
	auto what = [&](const Fiber& f) -> std::string {
		switch (f.state) {
		case State::Barrier: return format("at the barrier of line %d", f.line);
		case State::Simd: return format("at the SIMD shuffle of line %d", f.line);
		case State::Done: return "returned";
		default: return "ready";
		}
	};
	std::string out;
	for (int i = 0; i < w->nthreads;) {
		std::string s = what(w->fibers[i]);
		int j = i + 1;
		while (j < w->nthreads && what(w->fibers[j]) == s) {
			j++;
		}
		out += (i == j - 1 ? format("; thread %d: ", i) : format("; threads %d-%d: ", i, j - 1)) + s;
		i = j;
	}
	return out.substr(2);
}

void run_group(Worker* w, unsigned gx, unsigned gy, unsigned seed) {
	w->group = u3{gx, gy, 0};
	w->arrived = w->done = w->barrier_line = 0;
	w->decl_sizes.clear();
	w->rng.seed(seed * 2654435761u ^ (gy * 65536u + gx));
	for (size_t i = 0; i < kShared / 4; i++) {
		uint32_t v = 0x7fc00000u | (w->rng() & 0x3fffffu); // a NaN as a float, past 2^30 as an int
		memcpy(&w->shared[4 * i], &v, 4);
	}
	for (int g = 0; g < (w->nthreads + kWidth - 1) / kWidth; g++) {
		Simd& s = w->simd[g];
		s.size = std::min(kWidth, w->nthreads - g * kWidth);
		s.arrived = s.done = s.line = 0;
	}
	w->order.resize(w->nthreads);
	for (int i = 0; i < w->nthreads; i++) {
		start_fiber(w, i);
		w->order[i] = i;
	}
	while (w->done < w->nthreads) {
		std::shuffle(w->order.begin(), w->order.end(), w->rng);
		bool ran = false;
		for (int i : w->order) {
			Fiber& f = w->fibers[i];
			if (f.state != State::Ready) {
				continue;
			}
			cur = &f;
			tfd_switch(&w->sched_sp, f.sp);
			cur = nullptr;
			ran = true;
			if (w->fatal) {
				return;
			}
		}
		if (!ran) {
			fail(w, "deadlock: " + describe(w));
			w->fatal = true;
			return;
		}
	}
}

void set_altstack() {
	// Signals (a fault in a kernel) are handled on a stack of their own: the fiber's may be full.
	thread_local std::unique_ptr<char[]> alt;
	if (!alt) {
		alt.reset(new char[1 << 16]);
		stack_t ss{};
		ss.ss_sp = alt.get();
		ss.ss_size = 1 << 16;
		sigaltstack(&ss, nullptr);
	}
}

Worker* worker(size_t i) {
	while (pool.size() <= i) {
		auto w = std::make_unique<Worker>();
		size_t len = size_t(kMaxThreads) * (kStack + kPage);
		void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED) {
			perror("mmap");
			abort();
		}
		w->stacks = static_cast<unsigned char*>(p);
		for (int t = 0; t < kMaxThreads; t++) {
			mprotect(w->stacks + size_t(t) * (kStack + kPage), kPage, PROT_NONE);
		}
		pool.push_back(std::move(w));
	}
	return pool[i].get();
}

} // namespace

void barrier(int line) {
	Fiber* f = cur;
	Worker* w = f->w;
	if (w->arrived == 0) {
		w->barrier_line = line;
	} else if (line != w->barrier_line) {
		fail(w, format("threads wait at different barriers, at line %d and at line %d", w->barrier_line, line));
	}
	f->state = State::Barrier;
	f->line = line;
	w->arrived++;
	release_barrier(w);
	yield(f);
}

void simd_read(const void* in, void* out, unsigned size, unsigned src, int line) {
	Fiber* f = cur;
	Worker* w = f->w;
	Simd& s = w->simd[f->tp.simd];
	unsigned lane = f->tp.lane;
	if (s.arrived == 0) {
		s.line = line;
		s.vsize = size;
	} else if (line != s.line || size != s.vsize) {
		fail(w, format("lanes of SIMD group %u shuffle at different places, at line %d and at line %d", f->tp.simd, s.line, line));
	}
	memcpy(s.in[lane], in, size);
	s.src[lane] = (src & 0x10000u) ? lane ^ (src & 0xffffu) : src;
	f->state = State::Simd;
	f->line = line;
	s.arrived++;
	release_simd(w, f->tp.simd);
	yield(f);
	memcpy(out, s.out[lane], size);
}

void* shared_alloc(size_t size, size_t align, int line) {
	Fiber* f = cur;
	Worker* w = f->w;
	size_t at = (f->cursor + std::max<size_t>(align, 16) - 1) & ~(std::max<size_t>(align, 16) - 1);
	if (f->decls < w->decl_sizes.size()) {
		if (w->decl_sizes[f->decls] != size) {
			stop(f, format("threads declare threadgroup memory differently at line %d", line));
		}
	} else {
		w->decl_sizes.push_back(size);
	}
	f->decls++;
	if (at + size > kShared) {
		stop(f, format("threadgroup memory past %zu bytes at line %d", kShared, line));
	}
	f->cursor = at + size;
	return w->shared + at;
}

bool spurious_failure() { return (cur->cas_tries++ & 1) == 0; }

std::string launch(const KernelInfo& k, void* const* args, int gx, int gy, int threads, unsigned seed) {
	if (threads < 1 || threads > k.max_threads) {
		return format("%d threads per threadgroup, the kernel allows 1 to %d", threads, k.max_threads);
	}
	if (gx < 0 || gy < 0) {
		return "a negative grid";
	}
	int groups = gx * gy;
	// One OS thread per core, at most 8: more would only hold more stacks.
	int n = std::min<int>(groups, std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
	for (int i = 0; i < n; i++) {
		Worker* w = worker(i);
		w->k = &k;
		w->args = args;
		w->nthreads = threads;
		w->error.clear();
		w->fatal = false;
	}
	current_kernel = k.name;
	std::atomic<int> next{0};
	std::atomic<bool> failed{false};
	auto work = [&](Worker* w) {
		set_altstack();
		for (;;) {
			int i = next.fetch_add(1);
			if (i >= groups || failed.load()) {
				break;
			}
			run_group(w, unsigned(i % gx), unsigned(i / gx), seed);
			if (!w->error.empty()) {
				failed.store(true);
			}
		}
	};
	std::vector<std::thread> ts;
	for (int i = 1; i < n; i++) {
		ts.emplace_back(work, pool[i].get());
	}
	if (n > 0) {
		work(pool[0].get());
	}
	for (auto& t : ts) {
		t.join();
	}
	current_kernel = "";
	for (int i = 0; i < n; i++) {
		if (!pool[i]->error.empty()) {
			return pool[i]->error;
		}
	}
	return "";
}

const char* describe_stack(const void* addr) {
	auto a = static_cast<const unsigned char*>(addr);
	for (auto& w : pool) {
		if (a >= w->stacks && a < w->stacks + size_t(kMaxThreads) * (kStack + kPage)) {
			size_t off = size_t(a - w->stacks) % (kStack + kPage);
			return off < kPage ? "a thread's stack overflowed" : "in a thread's stack";
		}
	}
	return nullptr;
}

} // namespace tfd_exec
