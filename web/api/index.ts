export { HttpApi, HttpError, NetworkError, nextVersion, type AuthResult, type ChangePage, type Me, type SearchHit } from './http-client.js'
