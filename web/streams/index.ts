export { NodeStreams, type NodeView } from './node-streams.js'
