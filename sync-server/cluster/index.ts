export { startCluster, type Cluster } from './cluster.js'
