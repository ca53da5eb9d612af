export { ServerMetrics, metricsRoute, type MetricsSources } from './metrics.js'
