export { AccessService, assignmentLabel, assignmentScope, ACCESS_SEGMENT, ACCESS_NODE_TYPES, isAccessType } from './access-service.js'
