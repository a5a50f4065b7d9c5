// Package recorder defines the orchard.call/v1 record, the storage contract
// every backend implements, and the non-blocking pipeline that carries
// records from the proxy to a backend without slowing a call or losing one.
package recorder
