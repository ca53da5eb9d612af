export { NodeStreams, type AccessState, type NodeView } from './node-streams.js'
