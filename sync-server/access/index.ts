export { AccessService, assignmentLabel, assignmentScope, deniedEnded, ACCESS_SEGMENT, ACCESS_NODE_TYPES, isAccessType } from './access-service.js'
