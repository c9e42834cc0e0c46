//go:build darwin && arm64

package metal

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"
)

// The Objective-C runtime as the binding uses it: the frameworks and C entry points it loads,
// the classes it allocates, one block of selectors, and the few calls everything else is built
// on. Messages go through objc_msgSend called with purego.SyscallN: every argument is one
// register (an MTLSize, 24 bytes, goes as a pointer to a copy, which is what the arm64 calling
// convention does with an aggregate over 16 bytes), and nothing is looked up by reflection.

// Where the frameworks and the runtime live. With CGO_ENABLED=0 nothing is linked, so the
// frameworks are opened by path before any class of theirs is looked up.
const (
	metalPath      = "/System/Library/Frameworks/Metal.framework/Metal"
	foundationPath = "/System/Library/Frameworks/Foundation.framework/Foundation"
	libobjcPath    = "/usr/lib/libobjc.A.dylib"
)

var (
	loadOnce sync.Once
	loadErr  error

	// msgSend is objc_msgSend.
	msgSend uintptr
	// The ARC runtime entry points (documented by Clang, "Objective-C Automatic Reference
	// Counting", Runtime support): retain and release an object, push and pop an autorelease
	// pool. They do what -retain, -release and NSAutoreleasePool do, without a message.
	fnRetain, fnRelease, fnPoolPush, fnPoolPop uintptr
	// Metal's C functions: MTLCreateSystemDefaultDevice
	// (https://developer.apple.com/documentation/metal/mtlcreatesystemdefaultdevice()) and
	// MTLCopyAllDevices (https://developer.apple.com/documentation/metal/mtlcopyalldevices()).
	// Both return an object the caller owns.
	fnCreateSystemDefaultDevice, fnCopyAllDevices uintptr

	// Classes the binding allocates; class_MTLResidencySetDescriptor is 0 before macOS 15.
	class_NSString                  objc.Class
	class_MTLCompileOptions         objc.Class
	class_MTLResidencySetDescriptor objc.Class
)

// load opens Metal, Foundation and the runtime once, and resolves the C functions and classes.
func load() error {
	loadOnce.Do(func() {
		var lib [3]uintptr
		for i, path := range []string{libobjcPath, foundationPath, metalPath} {
			if lib[i], loadErr = purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL); loadErr != nil {
				loadErr = fmt.Errorf("open %s: %w", path, loadErr)
				return
			}
		}
		for _, s := range []struct {
			fn   *uintptr
			lib  uintptr
			name string
		}{
			{&msgSend, lib[0], "objc_msgSend"}, {&fnRetain, lib[0], "objc_retain"}, {&fnRelease, lib[0], "objc_release"},
			{&fnPoolPush, lib[0], "objc_autoreleasePoolPush"}, {&fnPoolPop, lib[0], "objc_autoreleasePoolPop"},
			{&fnCreateSystemDefaultDevice, lib[2], "MTLCreateSystemDefaultDevice"},
			{&fnCopyAllDevices, lib[2], "MTLCopyAllDevices"},
		} {
			if *s.fn, loadErr = purego.Dlsym(s.lib, s.name); loadErr != nil {
				loadErr = fmt.Errorf("look up %s: %w", s.name, loadErr)
				return
			}
		}
		class_NSString = objc.GetClass("NSString")
		class_MTLCompileOptions = objc.GetClass("MTLCompileOptions")
		class_MTLResidencySetDescriptor = objc.GetClass("MTLResidencySetDescriptor")
		if class_NSString == 0 || class_MTLCompileOptions == 0 {
			loadErr = errors.New("the Objective-C runtime has no NSString or MTLCompileOptions class")
		}
	})
	return loadErr
}

// The selectors tfd sends, each registered once from the table in api.go.
var (
	sel_alloc                                                       = selector("alloc")
	sel_init                                                        = selector("init")
	sel_respondsToSelector                                          = selector("respondsToSelector:")
	sel_initWithCString_encoding                                    = selector("initWithCString:encoding:")
	sel_UTF8String                                                  = selector("UTF8String")
	sel_localizedDescription                                        = selector("localizedDescription")
	sel_code                                                        = selector("code")
	sel_count                                                       = selector("count")
	sel_objectAtIndex                                               = selector("objectAtIndex:")
	sel_name                                                        = selector("name")
	sel_hasUnifiedMemory                                            = selector("hasUnifiedMemory")
	sel_recommendedMaxWorkingSetSize                                = selector("recommendedMaxWorkingSetSize")
	sel_maxBufferLength                                             = selector("maxBufferLength")
	sel_newCommandQueue                                             = selector("newCommandQueue")
	sel_newBufferWithLength_options                                 = selector("newBufferWithLength:options:")
	sel_newLibraryWithSource_options_error                          = selector("newLibraryWithSource:options:error:")
	sel_newComputePipelineStateWithFunction_error                   = selector("newComputePipelineStateWithFunction:error:")
	sel_newResidencySetWithDescriptor_error                         = selector("newResidencySetWithDescriptor:error:")
	sel_setLanguageVersion                                          = selector("setLanguageVersion:")
	sel_setFastMathEnabled                                          = selector("setFastMathEnabled:")
	sel_setMathMode                                                 = selector("setMathMode:")
	sel_setMathFloatingPointFunctions                               = selector("setMathFloatingPointFunctions:")
	sel_newFunctionWithName                                         = selector("newFunctionWithName:")
	sel_threadExecutionWidth                                        = selector("threadExecutionWidth")
	sel_maxTotalThreadsPerThreadgroup                               = selector("maxTotalThreadsPerThreadgroup")
	sel_contents                                                    = selector("contents")
	sel_gpuAddress                                                  = selector("gpuAddress")
	sel_commandBuffer                                               = selector("commandBuffer")
	sel_addResidencySet                                             = selector("addResidencySet:")
	sel_removeResidencySet                                          = selector("removeResidencySet:")
	sel_computeCommandEncoder                                       = selector("computeCommandEncoder")
	sel_blitCommandEncoder                                          = selector("blitCommandEncoder")
	sel_commit                                                      = selector("commit")
	sel_waitUntilCompleted                                          = selector("waitUntilCompleted")
	sel_status                                                      = selector("status")
	sel_error                                                       = selector("error")
	sel_endEncoding                                                 = selector("endEncoding")
	sel_setComputePipelineState                                     = selector("setComputePipelineState:")
	sel_setBuffer_offset_atIndex                                    = selector("setBuffer:offset:atIndex:")
	sel_setBytes_length_atIndex                                     = selector("setBytes:length:atIndex:")
	sel_dispatchThreadgroups_threadsPerThreadgroup                  = selector("dispatchThreadgroups:threadsPerThreadgroup:")
	sel_copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size = selector("copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:")
	sel_setInitialCapacity                                          = selector("setInitialCapacity:")
	sel_setLabel                                                    = selector("setLabel:")
	sel_addAllocation                                               = selector("addAllocation:")
	sel_removeAllocation                                            = selector("removeAllocation:")
	sel_requestResidency                                            = selector("requestResidency")
	sel_endResidency                                                = selector("endResidency")
)

// selector registers name with the runtime. It panics for a selector that api.go's messages
// does not list, so that table stays the whole list of what tfd sends.
func selector(name string) objc.SEL {
	if _, ok := lookupMessage(name); !ok {
		panic("metal: selector " + name + " is missing from the messages table in api.go")
	}
	return objc.RegisterName(name)
}

// send sends sel to id with args, each one register, and returns x0. It is for the cold paths
// (set-up, errors); the encoders send through preset blocks that allocate nothing.
//
//go:uintptrescapes
func send(id objc.ID, sel objc.SEL, args ...uintptr) uintptr {
	block := make([]uintptr, 0, 2+len(args))
	block = append(block, uintptr(id), uintptr(sel))
	r, _, _ := purego.SyscallN(msgSend, append(block, args...)...)
	return r
}

// call calls a C function with args, each one register, and returns x0.
//
//go:uintptrescapes
func call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

// isTrue reads a BOOL result: on arm64 BOOL is C's bool, defined only in x0's low byte.
func isTrue(r uintptr) bool { return r&0xff != 0 }

// pointerOf turns a C pointer returned in a register into an unsafe.Pointer. The memory belongs
// to Metal or Foundation, so Go's collector neither moves nor frees it; going through memory
// keeps vet's unsafeptr check, which cannot know that, quiet (purego does the same).
func pointerOf(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// retain adds a reference to id (objc_retain) and returns it.
func retain(id objc.ID) objc.ID { return objc.ID(call(fnRetain, uintptr(id))) }

// release drops a reference to id (objc_release); nil is a no-op.
func release(id objc.ID) {
	if id != 0 {
		call(fnRelease, uintptr(id))
	}
}

// pool is an autorelease pool pushed on a locked OS thread. Objects Metal returns without
// transferring ownership (a command buffer, an encoder, an NSError, an NSString) are
// autoreleased into the innermost pool of the thread; a goroutine has no pool of its own, so
// every stretch of code that receives such objects runs inside one, on one thread, and retains
// what it keeps past it.
type pool struct{ token uintptr }

// pushPool locks the goroutine to its thread and pushes a pool; pop undoes both.
func pushPool() pool {
	runtime.LockOSThread()
	return pool{call(fnPoolPush)}
}

func (p pool) pop() {
	call(fnPoolPop, p.token)
	runtime.UnlockOSThread()
}

// nsString returns a new NSString (owned: release it) holding s.
func nsString(s string) objc.ID {
	c := append([]byte(s), 0)
	obj := objc.ID(send(objc.ID(class_NSString), sel_alloc))
	return objc.ID(send(obj, sel_initWithCString_encoding, uintptr(unsafe.Pointer(&c[0])), uintptr(utf8StringEncoding)))
}

// goString copies an NSString into Go; nil gives "".
func goString(s objc.ID) string {
	if s == 0 {
		return ""
	}
	p := pointerOf(send(s, sel_UTF8String))
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(p, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(p), n))
}

// nsError turns an NSError into a Go error carrying its localizedDescription and code; what
// says which call failed. Call it inside a pool: the description is autoreleased.
func nsError(what string, e objc.ID) error {
	if e == 0 {
		return fmt.Errorf("metal: %s failed and gave no NSError", what)
	}
	return fmt.Errorf("metal: %s: %s (code %d)", what, goString(objc.ID(send(e, sel_localizedDescription))), int64(send(e, sel_code)))
}

// responds reports whether id answers sel (-respondsToSelector:), the way to ask for API newer
// than the oldest macOS tfd runs on.
func responds(id objc.ID, sel objc.SEL) bool {
	return isTrue(send(id, sel_respondsToSelector, uintptr(sel)))
}

// newObject allocates and initialises an instance of class (+alloc, -init); the caller owns it.
func newObject(class objc.Class) objc.ID {
	return objc.ID(send(objc.ID(send(objc.ID(class), sel_alloc)), sel_init))
}
