package metal

// The part of Apple's API that tfd uses, as data every platform can read: the enum values it
// passes, and every Objective-C message it sends with the kinds of its arguments. The darwin
// binding registers its selectors from the table below and from nowhere else, and
// selectors_test.go checks the table on Linux against Apple's metal-cpp headers
// (testdata/api.tsv, testdata/enums.txt) and against the darwin sources.

// Typed enums with Apple's values. Each is checked against metal-cpp's enums.txt by the tests,
// and the values were read against Apple's documentation as well.

// resourceOptions is MTLResourceOptions: storage mode at bit 4, CPU cache mode at bit 0, hazard
// tracking at bit 8 (https://developer.apple.com/documentation/metal/mtlresourceoptions).
type resourceOptions uint64

// resourceStorageModeShift is MTLResourceStorageModeShift: an MTLStorageMode shifted by it is
// the storage mode's MTLResourceOptions bits (MTLResource.h).
const resourceStorageModeShift = 4

const (
	// resourceCPUCacheModeDefaultCache is MTLResourceCPUCacheModeDefaultCache: reads and writes
	// by the CPU in their order (tfd reads logits and writes row metadata from the CPU).
	resourceCPUCacheModeDefaultCache resourceOptions = 0
	// resourceStorageModeShared is MTLResourceStorageModeShared: one allocation in system memory
	// that the CPU and the GPU both address; on Apple silicon that is all memory.
	resourceStorageModeShared = resourceOptions(storageModeShared) << resourceStorageModeShift
	// resourceHazardTrackingModeDefault is MTLResourceHazardTrackingModeDefault: for a buffer
	// made by the device (not from a heap), tracked: Metal orders the commands that write it
	// after those that read it and before those that read it next
	// (https://developer.apple.com/documentation/metal/mtlhazardtrackingmode/tracked).
	resourceHazardTrackingModeDefault resourceOptions = 0
)

// storageMode is MTLStorageMode (https://developer.apple.com/documentation/metal/mtlstoragemode).
type storageMode uint64

// storageModeShared is MTLStorageModeShared.
const storageModeShared storageMode = 0

// commandBufferStatus is MTLCommandBufferStatus
// (https://developer.apple.com/documentation/metal/mtlcommandbufferstatus).
type commandBufferStatus uint64

const (
	commandBufferStatusNotEnqueued commandBufferStatus = 0
	commandBufferStatusEnqueued    commandBufferStatus = 1
	commandBufferStatusCommitted   commandBufferStatus = 2
	commandBufferStatusScheduled   commandBufferStatus = 3
	commandBufferStatusCompleted   commandBufferStatus = 4
	commandBufferStatusError       commandBufferStatus = 5
)

// languageVersion is MTLLanguageVersion: major << 16 | minor
// (https://developer.apple.com/documentation/metal/mtllanguageversion).
type languageVersion uint64

// languageVersion3_1 is MTLLanguageVersion3_1, macOS 14.0 and later
// (https://developer.apple.com/documentation/metal/mtllanguageversion/version3_1).
const languageVersion3_1 languageVersion = 3<<16 | 1

// mathMode is MTLMathMode, an NSInteger (https://developer.apple.com/documentation/metal/mtlmathmode).
type mathMode int64

// mathModeSafe is MTLMathModeSafe: no transformation that could change a result.
const mathModeSafe mathMode = 0

// mathFloatingPointFunctions is MTLMathFloatingPointFunctions, an NSInteger
// (https://developer.apple.com/documentation/metal/mtlmathfloatingpointfunctions).
type mathFloatingPointFunctions int64

// mathFloatingPointFunctionsPrecise is MTLMathFloatingPointFunctionsPrecise.
const mathFloatingPointFunctionsPrecise mathFloatingPointFunctions = 1

// stringEncoding is NSStringEncoding (https://developer.apple.com/documentation/foundation/nsstringencoding).
type stringEncoding uint64

// utf8StringEncoding is NSUTF8StringEncoding.
const utf8StringEncoding stringEncoding = 4

// kind is how an argument or a result crosses objc_msgSend on darwin/arm64.
type kind uint8

const (
	kindVoid     kind = iota + 1 // no result
	kindObject                   // an Objective-C object: id<MTLBuffer>, NSString*, a class
	kindPointer                  // a C pointer: const void*, const char*, NSError**
	kindUInteger                 // NSUInteger, uint64_t, or an enum or option set stored in one
	kindInteger                  // NSInteger or an enum stored in one
	kindBool                     // BOOL (C bool on arm64): only the low byte of x0 is defined
	kindSize                     // MTLSize by value: three NSUInteger, 24 bytes, so a pointer to a copy on arm64
	kindSelector                 // SEL
)

func (k kind) String() string {
	names := [...]string{"?", "void", "object", "pointer", "NSUInteger", "NSInteger", "BOOL", "MTLSize", "SEL"}
	if int(k) < len(names) {
		return names[k]
	}
	return "?"
}

// message is one Objective-C message tfd sends: the selector, the metal-cpp class whose method
// sends it (its row in Apple's headers), the kinds of its arguments after the receiver and
// _cmd, and the kind of its result.
type message struct {
	selector string
	class    string
	args     []kind
	result   kind
}

// messages is every message tfd sends, by the protocol or class that receives it. The darwin
// binding gets its selectors only through selector(name), which panics at start-up for a name
// not listed here.
var messages = []message{
	// NSObject: alloc and init reach classes (MTLCompileOptions, MTLResidencySetDescriptor,
	// NSString) before their own init; respondsToSelector: asks the device about macOS 15 API.
	{"alloc", "NS::Object", nil, kindObject},
	{"init", "NS::Object", nil, kindObject},
	{"respondsToSelector:", "NS::Object", []kind{kindSelector}, kindBool},
	// NSString, NSError, NSArray.
	{"initWithCString:encoding:", "NS::String", []kind{kindPointer, kindUInteger}, kindObject},
	{"UTF8String", "NS::String", nil, kindPointer},
	{"localizedDescription", "NS::Error", nil, kindObject},
	{"code", "NS::Error", nil, kindInteger},
	{"count", "NS::Array", nil, kindUInteger},
	{"objectAtIndex:", "NS::Array", []kind{kindUInteger}, kindObject},
	// MTLDevice.
	{"name", "MTL::Device", nil, kindObject},
	{"hasUnifiedMemory", "MTL::Device", nil, kindBool},
	{"recommendedMaxWorkingSetSize", "MTL::Device", nil, kindUInteger},
	{"maxBufferLength", "MTL::Device", nil, kindUInteger},
	{"newCommandQueue", "MTL::Device", nil, kindObject},
	{"newBufferWithLength:options:", "MTL::Device", []kind{kindUInteger, kindUInteger}, kindObject},
	{"newLibraryWithSource:options:error:", "MTL::Device", []kind{kindObject, kindObject, kindPointer}, kindObject},
	{"newComputePipelineStateWithFunction:error:", "MTL::Device", []kind{kindObject, kindPointer}, kindObject},
	{"newResidencySetWithDescriptor:error:", "MTL::Device", []kind{kindObject, kindPointer}, kindObject},
	// MTLCompileOptions.
	{"setLanguageVersion:", "MTL::CompileOptions", []kind{kindUInteger}, kindVoid},
	{"setFastMathEnabled:", "MTL::CompileOptions", []kind{kindBool}, kindVoid},
	{"setMathMode:", "MTL::CompileOptions", []kind{kindInteger}, kindVoid},
	{"setMathFloatingPointFunctions:", "MTL::CompileOptions", []kind{kindInteger}, kindVoid},
	// MTLLibrary, MTLComputePipelineState.
	{"newFunctionWithName:", "MTL::Library", []kind{kindObject}, kindObject},
	{"threadExecutionWidth", "MTL::ComputePipelineState", nil, kindUInteger},
	{"maxTotalThreadsPerThreadgroup", "MTL::ComputePipelineState", nil, kindUInteger},
	// MTLBuffer.
	{"contents", "MTL::Buffer", nil, kindPointer},
	{"gpuAddress", "MTL::Buffer", nil, kindUInteger},
	// MTLCommandQueue, MTLCommandBuffer.
	{"commandBuffer", "MTL::CommandQueue", nil, kindObject},
	{"addResidencySet:", "MTL::CommandQueue", []kind{kindObject}, kindVoid},
	{"removeResidencySet:", "MTL::CommandQueue", []kind{kindObject}, kindVoid},
	{"computeCommandEncoder", "MTL::CommandBuffer", nil, kindObject},
	{"blitCommandEncoder", "MTL::CommandBuffer", nil, kindObject},
	{"commit", "MTL::CommandBuffer", nil, kindVoid},
	{"waitUntilCompleted", "MTL::CommandBuffer", nil, kindVoid},
	{"status", "MTL::CommandBuffer", nil, kindUInteger},
	{"error", "MTL::CommandBuffer", nil, kindObject},
	// MTLCommandEncoder, MTLComputeCommandEncoder, MTLBlitCommandEncoder.
	{"endEncoding", "MTL::CommandEncoder", nil, kindVoid},
	{"setComputePipelineState:", "MTL::ComputeCommandEncoder", []kind{kindObject}, kindVoid},
	{"setBuffer:offset:atIndex:", "MTL::ComputeCommandEncoder", []kind{kindObject, kindUInteger, kindUInteger}, kindVoid},
	{"setBytes:length:atIndex:", "MTL::ComputeCommandEncoder", []kind{kindPointer, kindUInteger, kindUInteger}, kindVoid},
	{"dispatchThreadgroups:threadsPerThreadgroup:", "MTL::ComputeCommandEncoder", []kind{kindSize, kindSize}, kindVoid},
	{"copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:", "MTL::BlitCommandEncoder",
		[]kind{kindObject, kindUInteger, kindObject, kindUInteger, kindUInteger}, kindVoid},
	// MTLResidencySetDescriptor, MTLResidencySet (macOS 15).
	{"setInitialCapacity:", "MTL::ResidencySetDescriptor", []kind{kindUInteger}, kindVoid},
	{"setLabel:", "MTL::ResidencySetDescriptor", []kind{kindObject}, kindVoid},
	{"addAllocation:", "MTL::ResidencySet", []kind{kindObject}, kindVoid},
	{"removeAllocation:", "MTL::ResidencySet", []kind{kindObject}, kindVoid},
	{"commit", "MTL::ResidencySet", nil, kindVoid},
	{"requestResidency", "MTL::ResidencySet", nil, kindVoid},
	{"endResidency", "MTL::ResidencySet", nil, kindVoid},
}

// lookupMessage returns the row of messages for selector, the first if two classes send it
// (commit): they agree on its arguments, which the tests check.
func lookupMessage(selector string) (message, bool) {
	for _, m := range messages {
		if m.selector == selector {
			return m, true
		}
	}
	return message{}, false
}
