package engine

// ConvertFloats lets the external tests build a safetensors folder converted exactly as
// ExportGGUF converts the tensors it writes.
var ConvertFloats = convertFloats
