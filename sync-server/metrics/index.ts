export { ServerMetrics, metricsRoute, type MetricsSources } from './metrics.js'
export { adminOverviewRoute, isOperator, type AdminOverview } from './overview.js'
