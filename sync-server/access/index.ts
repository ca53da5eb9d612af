export { AccessService, assignmentLabel, assignmentScope, deniedBegun, deniedEnded, ACCESS_SEGMENT, ACCESS_NODE_TYPES, isAccessType, membershipOf } from './access-service.js'
