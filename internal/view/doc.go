// Package view is the operator's view of the running window_aggregator components: the figures the
// window_aggregator_view extension serves (its types are the JSON of its API), and the one door to
// them: a component registers itself as a Source when it starts, and the extension reads every
// registered one; Watch keeps the windows a series emitted, for the explainer. It knows nothing of
// the component's internals but the results the engine fires.
package view
