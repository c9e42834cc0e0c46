// The MSL runner: reads commands on stdin, one a line, and answers each with one line on stdout.
//
//	buf ID PATH                  load the file PATH as buffer ID (replacing any earlier one)
//	run KERNEL GX GY THREADS ARG...
//	                             launch KERNEL on GX × GY threadgroups of THREADS threads; ARG i
//	                             is bound to [[buffer(i)]]: @ID a buffer, =HEX the little-endian
//	                             bytes of a constant scalar (as setBytes would pass it); then every
//	                             buffer bound is written back to its file
//	quit
//
// Answers: "ok", or "fail MESSAGE". A fault in a kernel (a read past a buffer, a misaligned
// vector load, a stack overflow) answers "fail" and ends the process.
//
// Each buffer lies between two inaccessible pages, ending within 16 bytes of the upper one and
// starting 16-byte aligned, so a read or write outside it faults, as a misaligned vector load
// traps (the kernels are built with -fsanitize=alignment).
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tfd_exec.h"

namespace {

constexpr size_t kPage = 4096;

struct Buffer {
	int id = -1;
	unsigned char* map = nullptr;
	size_t maplen = 0;
	unsigned char* data = nullptr;
	size_t size = 0;
	std::string path;
};

// Live buffers, also read by the signal handler to say which one a fault hit.
constexpr int kMaxBuffers = 256;
Buffer* live[kMaxBuffers];

Buffer* guarded(size_t size) {
	auto b = new Buffer;
	size_t pages = (size + kPage - 1) / kPage;
	b->maplen = (pages + 2) * kPage;
	void* p = mmap(nullptr, b->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	b->map = static_cast<unsigned char*>(p);
	mprotect(b->map, kPage, PROT_NONE);
	mprotect(b->map + (pages + 1) * kPage, kPage, PROT_NONE);
	b->data = b->map + kPage + ((pages * kPage - size) & ~size_t(15));
	b->size = size;
	for (auto& slot : live) {
		if (slot == nullptr) {
			slot = b;
			return b;
		}
	}
	fprintf(stderr, "runner: more than %d buffers\n", kMaxBuffers);
	exit(2);
}

void release(Buffer* b) {
	for (auto& slot : live) {
		if (slot == b) {
			slot = nullptr;
		}
	}
	munmap(b->map, b->maplen);
	delete b;
}

bool read_file(const std::string& path, std::vector<unsigned char>& out) {
	FILE* f = fopen(path.c_str(), "rb");
	if (!f) {
		return false;
	}
	out.clear();
	unsigned char chunk[1 << 16];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
		out.insert(out.end(), chunk, chunk + n);
	}
	fclose(f);
	return true;
}

bool write_file(const Buffer& b) {
	FILE* f = fopen(b.path.c_str(), "wb");
	if (!f) {
		return false;
	}
	bool ok = fwrite(b.data, 1, b.size, f) == b.size;
	return fclose(f) == 0 && ok;
}

void on_signal(int sig, siginfo_t* info, void*) {
	const char* what = sig == SIGSEGV ? "SIGSEGV (a read or write outside its buffer or stack)"
	                   : sig == SIGBUS ? "SIGBUS"
	                   : sig == SIGILL ? "SIGILL (a misaligned load or store: -fsanitize=alignment traps)"
	                   : sig == SIGFPE ? "SIGFPE (an integer division by zero)"
	                                   : "a signal";
	tfd_exec::fail_fast(what, info->si_addr);
}

std::string single_line(std::string s) {
	for (auto& c : s) {
		if (c == '\n') {
			c = ' ';
		}
	}
	return s;
}

std::string run(std::istringstream& in, std::map<int, Buffer*>& bufs, unsigned seed) {
	std::string name;
	int gx = 0, gy = 0, threads = 0;
	if (!(in >> name >> gx >> gy >> threads)) {
		return "run: want KERNEL GX GY THREADS ARG...";
	}
	const tfd_exec::KernelInfo* k = nullptr;
	for (int i = 0; i < tfd_exec::kernel_count; i++) {
		if (name == tfd_exec::kernel_table[i].name) {
			k = &tfd_exec::kernel_table[i];
		}
	}
	if (!k) {
		return "no kernel " + name;
	}
	std::vector<std::string> words;
	for (std::string w; in >> w;) {
		words.push_back(w);
	}
	if (int(words.size()) != k->nargs) {
		return name + ": " + std::to_string(words.size()) + " arguments, the kernel takes " + std::to_string(k->nargs);
	}
	std::vector<void*> args(k->nargs);
	std::vector<Buffer*> scalars, bound;
	std::string err;
	for (int i = 0; i < k->nargs && err.empty(); i++) {
		const std::string& w = words[i];
		if (w[0] == '@') {
			auto it = bufs.find(atoi(w.c_str() + 1));
			if (it == bufs.end() || k->sizes[i] != 0) {
				err = name + ": argument " + std::to_string(i) + " " + w + (k->sizes[i] ? " is a scalar" : ": no such buffer");
				break;
			}
			args[i] = it->second->data;
			bound.push_back(it->second);
		} else if (w[0] == '=' && w.size() % 2 == 1 && int(w.size() / 2) == k->sizes[i]) {
			Buffer* s = guarded(w.size() / 2);
			for (size_t j = 0; j < s->size; j++) {
				s->data[j] = (unsigned char)strtoul(w.substr(1 + 2 * j, 2).c_str(), nullptr, 16);
			}
			args[i] = s->data;
			scalars.push_back(s);
		} else {
			err = name + ": argument " + std::to_string(i) + " " + w + ": want @ID or =HEX of " + std::to_string(k->sizes[i]) + " bytes";
		}
	}
	if (err.empty()) {
		err = tfd_exec::launch(*k, args.data(), gx, gy, threads, seed);
		for (Buffer* b : bound) {
			if (!write_file(*b)) {
				err = "cannot write " + b->path;
			}
		}
	}
	for (Buffer* s : scalars) {
		release(s);
	}
	return err;
}

} // namespace

namespace tfd_exec {

void fail_fast(const char* what, const void* addr) {
	const char* where = describe_stack(addr);
	char place[160] = "";
	auto a = static_cast<const unsigned char*>(addr);
	for (Buffer* b : live) {
		if (b && a >= b->map && a < b->map + b->maplen) {
			if (a < b->data) {
				snprintf(place, sizeof place, "%zu bytes before buffer @%d", size_t(b->data - a), b->id);
			} else if (a >= b->data + b->size) {
				snprintf(place, sizeof place, "%zu bytes past the end of buffer @%d of %zu bytes", size_t(a - b->data - b->size), b->id, b->size);
			} else {
				snprintf(place, sizeof place, "byte %zu of buffer @%d", size_t(a - b->data), b->id);
			}
			where = place;
		}
	}
	char msg[512];
	int n = snprintf(msg, sizeof msg, "fail %s: %s at %p (%s)\n", current_kernel, what, addr, where ? where : "not in a buffer");
	if (write(1, msg, size_t(n)) < 0) {
		_exit(4);
	}
	_exit(3);
}

} // namespace tfd_exec

int main() {
	struct sigaction sa {};
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE}) {
		sigaction(sig, &sa, nullptr);
	}
	std::map<int, Buffer*> bufs;
	unsigned seed = 1;
	for (std::string line; std::getline(std::cin, line);) {
		std::istringstream in(line);
		std::string cmd, reply = "ok";
		in >> cmd;
		if (cmd == "quit") {
			break;
		} else if (cmd == "buf") {
			int id;
			std::string path;
			std::vector<unsigned char> data;
			if (!(in >> id >> path) || !read_file(path, data)) {
				reply = "fail buf: want ID PATH of a readable file: " + line;
			} else {
				if (bufs.count(id)) {
					release(bufs[id]);
				}
				Buffer* b = guarded(data.size());
				b->id = id;
				b->path = path;
				memcpy(b->data, data.data(), data.size());
				bufs[id] = b;
			}
		} else if (cmd == "run") {
			std::string err = run(in, bufs, seed++);
			if (!err.empty()) {
				reply = "fail " + single_line(err);
			}
		} else {
			reply = "fail unknown command: " + line;
		}
		std::cout << reply << std::endl;
	}
	return 0;
}
