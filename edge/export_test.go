package edge

// ProcessCPU is processCPU for the benchmarks of package edge_test.
var ProcessCPU = processCPU
