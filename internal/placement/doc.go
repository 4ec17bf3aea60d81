// Package placement decides which gateway node owns each key (a partition,
// a consumer group) from the members of a view (docs/cluster.md §3):
// consistent hashing with bounded loads over the keys a view document
// lists, and rendezvous hashing for keys it does not. It is pure: the same
// members and keys give the same owners on every node. It imports nothing
// of the module.
package placement
