package kafkawire

// RequestCost is an upper bound, in bytes, of the memory that decoding and
// answering a request of frameLen bytes (its size prefix excluded) may take:
// what the gateway reserves from its request budget (queued_max_request_bytes)
// before it reads the frame's body. A Produce request costs its frame (its
// record batches alias the frame; decompression has a budget of its own);
// any other request 64 times its frame, since kmsg decodes a 2-byte array
// entry into tens of bytes and the answer adds as much again.
func RequestCost(key, version int16, frameLen int) int64 {
	if key == 0 {
		return int64(frameLen)
	}
	return 64 * int64(frameLen)
}
