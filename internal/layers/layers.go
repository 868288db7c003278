// Package layers holds the test that keeps the project's packages in their
// layers (docs/ARCHITECTURE.md): the engine knows nothing above it, the
// server depends on the host interfaces and not on an engine, the SDK's
// users (examples, demo, benchmarks) never import each other's code, and
// the `art` binary compiles no example.
package layers
