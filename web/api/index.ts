export { HttpApi, HttpError, NetworkError, nextVersion, type AuthResult, type Capabilities, type ChangePage, type Me, type SearchHit, type TrashEntry } from './http-client.js'
