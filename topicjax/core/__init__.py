"""The engine shared by every EM-type model: device layouts, E-step, M-step, drivers."""
