export { ServerMetrics, metricsRoute, type MetricsSources } from './metrics.js'
export { adminOverviewRoute, isOperator } from './overview.js'
