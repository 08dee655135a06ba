package edge

// observabilityConfig returns the handler's ObservabilityConfig.
func (h *Handler) observabilityConfig() *ObservabilityConfig { return &h.ObservabilityConfig }
