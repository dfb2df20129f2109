/*
 * mpi.h: the MPI 3.1 C interface of sempi (libsempi_mpi).
 *
 * Existing MPI programs compile with `sempicc` / `sempicxx` and run under `sempirun`; every
 * message travels over the job's mutually authenticated TLS 1.3 mesh and is subject to the
 * job's policy. Communicator names set with MPI_Comm_set_name are the names policies use.
 *
 * Only functions that work are declared: a program that calls an MPI function sempi does not
 * provide fails to compile (implicit declaration) or to link, never silently at run time.
 *
 * Handles are pointers to distinct incomplete struct types, so the C compiler rejects mixing
 * them (an MPI_Datatype passed as an MPI_Comm); predefined handles are addresses of objects in
 * the library, as in Open MPI, and can appear in static initializers.
 *
 * Thread safety: MPI_THREAD_MULTIPLE. A single request, datatype or communicator handle must not
 * be freed by one thread while another uses it (as in every MPI).
 */
#ifndef SEMPI_MPI_H_INCLUDED
#define SEMPI_MPI_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility; everything declared here is its interface. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* ---- versions ------------------------------------------------------------------------------ */
#define MPI_VERSION 3
#define MPI_SUBVERSION 1
/* Identifies the implementation, like OPEN_MPI and MPICH_VERSION. */
#define SEMPI_MPI 1
#define SEMPI_MPI_VERSION "0.1.0"

/* Casts in the constant macros below, spelled so C++ programs built with -Wold-style-cast or
 * -Wzero-as-null-pointer-constant stay warning-free. */
#ifdef __cplusplus
#define SEMPI_MPI_NULL(type) (static_cast<type>(nullptr))
#define SEMPI_MPI_ADDRESS(type, value) (reinterpret_cast<type>(value))
#else
#define SEMPI_MPI_NULL(type) ((type)0)
#define SEMPI_MPI_ADDRESS(type, value) ((type)(value))
#endif

/* ---- basic integer types ------------------------------------------------------------------ */
typedef intptr_t MPI_Aint;
typedef long long MPI_Offset;
typedef long long MPI_Count;
typedef int MPI_Fint;

/* ---- handles ------------------------------------------------------------------------------ */
struct sempi_mpi_comm;
struct sempi_mpi_group;
struct sempi_mpi_datatype;
struct sempi_mpi_request;
struct sempi_mpi_op;
struct sempi_mpi_errhandler;
struct sempi_mpi_info;

typedef struct sempi_mpi_comm *MPI_Comm;
typedef struct sempi_mpi_group *MPI_Group;
typedef struct sempi_mpi_datatype *MPI_Datatype;
typedef struct sempi_mpi_request *MPI_Request;
typedef struct sempi_mpi_op *MPI_Op;
typedef struct sempi_mpi_errhandler *MPI_Errhandler;
typedef struct sempi_mpi_info *MPI_Info;

/* The status of a completed receive, probe or request. MPI_SOURCE, MPI_TAG and MPI_ERROR are
 * public; the remaining fields belong to the library (use MPI_Get_count / MPI_Test_cancelled). */
typedef struct MPI_Status {
  int MPI_SOURCE;
  int MPI_TAG;
  int MPI_ERROR;
  int sempi_cancelled;
  MPI_Count sempi_bytes;
} MPI_Status;

#define MPI_STATUS_IGNORE SEMPI_MPI_NULL(MPI_Status*)
#define MPI_STATUSES_IGNORE SEMPI_MPI_NULL(MPI_Status*)

/* ---- predefined objects (defined in libsempi_mpi) ----------------------------------------- */
extern struct sempi_mpi_comm sempi_mpi_comm_world;
extern struct sempi_mpi_comm sempi_mpi_comm_self;
extern struct sempi_mpi_group sempi_mpi_group_empty;
extern struct sempi_mpi_errhandler sempi_mpi_errors_are_fatal;
extern struct sempi_mpi_errhandler sempi_mpi_errors_return;

#define MPI_COMM_WORLD (&sempi_mpi_comm_world)
#define MPI_COMM_SELF (&sempi_mpi_comm_self)
#define MPI_COMM_NULL SEMPI_MPI_NULL(MPI_Comm)
#define MPI_GROUP_EMPTY (&sempi_mpi_group_empty)
#define MPI_GROUP_NULL SEMPI_MPI_NULL(MPI_Group)
#define MPI_DATATYPE_NULL SEMPI_MPI_NULL(MPI_Datatype)
#define MPI_REQUEST_NULL SEMPI_MPI_NULL(MPI_Request)
#define MPI_OP_NULL SEMPI_MPI_NULL(MPI_Op)
#define MPI_INFO_NULL SEMPI_MPI_NULL(MPI_Info)
#define MPI_ERRHANDLER_NULL SEMPI_MPI_NULL(MPI_Errhandler)
#define MPI_ERRORS_ARE_FATAL (&sempi_mpi_errors_are_fatal)
#define MPI_ERRORS_RETURN (&sempi_mpi_errors_return)

/* Datatypes. */
#define SEMPI_MPI_DECLARE_TYPE(name) extern struct sempi_mpi_datatype sempi_mpi_type_##name;
SEMPI_MPI_DECLARE_TYPE(char)
SEMPI_MPI_DECLARE_TYPE(signed_char)
SEMPI_MPI_DECLARE_TYPE(unsigned_char)
SEMPI_MPI_DECLARE_TYPE(byte)
SEMPI_MPI_DECLARE_TYPE(packed)
SEMPI_MPI_DECLARE_TYPE(short)
SEMPI_MPI_DECLARE_TYPE(unsigned_short)
SEMPI_MPI_DECLARE_TYPE(int)
SEMPI_MPI_DECLARE_TYPE(unsigned)
SEMPI_MPI_DECLARE_TYPE(long)
SEMPI_MPI_DECLARE_TYPE(unsigned_long)
SEMPI_MPI_DECLARE_TYPE(long_long)
SEMPI_MPI_DECLARE_TYPE(unsigned_long_long)
SEMPI_MPI_DECLARE_TYPE(float)
SEMPI_MPI_DECLARE_TYPE(double)
SEMPI_MPI_DECLARE_TYPE(long_double)
SEMPI_MPI_DECLARE_TYPE(wchar)
SEMPI_MPI_DECLARE_TYPE(c_bool)
SEMPI_MPI_DECLARE_TYPE(int8_t)
SEMPI_MPI_DECLARE_TYPE(int16_t)
SEMPI_MPI_DECLARE_TYPE(int32_t)
SEMPI_MPI_DECLARE_TYPE(int64_t)
SEMPI_MPI_DECLARE_TYPE(uint8_t)
SEMPI_MPI_DECLARE_TYPE(uint16_t)
SEMPI_MPI_DECLARE_TYPE(uint32_t)
SEMPI_MPI_DECLARE_TYPE(uint64_t)
SEMPI_MPI_DECLARE_TYPE(aint)
SEMPI_MPI_DECLARE_TYPE(offset)
SEMPI_MPI_DECLARE_TYPE(count)
SEMPI_MPI_DECLARE_TYPE(c_float_complex)
SEMPI_MPI_DECLARE_TYPE(c_double_complex)
SEMPI_MPI_DECLARE_TYPE(c_long_double_complex)
SEMPI_MPI_DECLARE_TYPE(float_int)
SEMPI_MPI_DECLARE_TYPE(double_int)
SEMPI_MPI_DECLARE_TYPE(long_int)
SEMPI_MPI_DECLARE_TYPE(2int)
SEMPI_MPI_DECLARE_TYPE(short_int)
SEMPI_MPI_DECLARE_TYPE(long_double_int)
#undef SEMPI_MPI_DECLARE_TYPE

#define MPI_CHAR (&sempi_mpi_type_char)
#define MPI_SIGNED_CHAR (&sempi_mpi_type_signed_char)
#define MPI_UNSIGNED_CHAR (&sempi_mpi_type_unsigned_char)
#define MPI_BYTE (&sempi_mpi_type_byte)
#define MPI_PACKED (&sempi_mpi_type_packed)
#define MPI_SHORT (&sempi_mpi_type_short)
#define MPI_UNSIGNED_SHORT (&sempi_mpi_type_unsigned_short)
#define MPI_INT (&sempi_mpi_type_int)
#define MPI_UNSIGNED (&sempi_mpi_type_unsigned)
#define MPI_LONG (&sempi_mpi_type_long)
#define MPI_UNSIGNED_LONG (&sempi_mpi_type_unsigned_long)
#define MPI_LONG_LONG_INT (&sempi_mpi_type_long_long)
#define MPI_LONG_LONG (&sempi_mpi_type_long_long)
#define MPI_UNSIGNED_LONG_LONG (&sempi_mpi_type_unsigned_long_long)
#define MPI_FLOAT (&sempi_mpi_type_float)
#define MPI_DOUBLE (&sempi_mpi_type_double)
#define MPI_LONG_DOUBLE (&sempi_mpi_type_long_double)
#define MPI_WCHAR (&sempi_mpi_type_wchar)
#define MPI_C_BOOL (&sempi_mpi_type_c_bool)
#define MPI_INT8_T (&sempi_mpi_type_int8_t)
#define MPI_INT16_T (&sempi_mpi_type_int16_t)
#define MPI_INT32_T (&sempi_mpi_type_int32_t)
#define MPI_INT64_T (&sempi_mpi_type_int64_t)
#define MPI_UINT8_T (&sempi_mpi_type_uint8_t)
#define MPI_UINT16_T (&sempi_mpi_type_uint16_t)
#define MPI_UINT32_T (&sempi_mpi_type_uint32_t)
#define MPI_UINT64_T (&sempi_mpi_type_uint64_t)
#define MPI_AINT (&sempi_mpi_type_aint)
#define MPI_OFFSET (&sempi_mpi_type_offset)
#define MPI_COUNT (&sempi_mpi_type_count)
#define MPI_C_COMPLEX (&sempi_mpi_type_c_float_complex)
#define MPI_C_FLOAT_COMPLEX (&sempi_mpi_type_c_float_complex)
#define MPI_C_DOUBLE_COMPLEX (&sempi_mpi_type_c_double_complex)
#define MPI_C_LONG_DOUBLE_COMPLEX (&sempi_mpi_type_c_long_double_complex)
/* Pair types for MPI_MINLOC / MPI_MAXLOC: struct { value; int index; } with C layout. */
#define MPI_FLOAT_INT (&sempi_mpi_type_float_int)
#define MPI_DOUBLE_INT (&sempi_mpi_type_double_int)
#define MPI_LONG_INT (&sempi_mpi_type_long_int)
#define MPI_2INT (&sempi_mpi_type_2int)
#define MPI_SHORT_INT (&sempi_mpi_type_short_int)
#define MPI_LONG_DOUBLE_INT (&sempi_mpi_type_long_double_int)

/* Reduction operations. */
#define SEMPI_MPI_DECLARE_OP(name) extern struct sempi_mpi_op sempi_mpi_op_##name;
SEMPI_MPI_DECLARE_OP(max)
SEMPI_MPI_DECLARE_OP(min)
SEMPI_MPI_DECLARE_OP(sum)
SEMPI_MPI_DECLARE_OP(prod)
SEMPI_MPI_DECLARE_OP(land)
SEMPI_MPI_DECLARE_OP(band)
SEMPI_MPI_DECLARE_OP(lor)
SEMPI_MPI_DECLARE_OP(bor)
SEMPI_MPI_DECLARE_OP(lxor)
SEMPI_MPI_DECLARE_OP(bxor)
SEMPI_MPI_DECLARE_OP(minloc)
SEMPI_MPI_DECLARE_OP(maxloc)
#undef SEMPI_MPI_DECLARE_OP

#define MPI_MAX (&sempi_mpi_op_max)
#define MPI_MIN (&sempi_mpi_op_min)
#define MPI_SUM (&sempi_mpi_op_sum)
#define MPI_PROD (&sempi_mpi_op_prod)
#define MPI_LAND (&sempi_mpi_op_land)
#define MPI_BAND (&sempi_mpi_op_band)
#define MPI_LOR (&sempi_mpi_op_lor)
#define MPI_BOR (&sempi_mpi_op_bor)
#define MPI_LXOR (&sempi_mpi_op_lxor)
#define MPI_BXOR (&sempi_mpi_op_bxor)
#define MPI_MINLOC (&sempi_mpi_op_minloc)
#define MPI_MAXLOC (&sempi_mpi_op_maxloc)

/* ---- constants ---------------------------------------------------------------------------- */
#define MPI_ANY_SOURCE (-1)
#define MPI_ANY_TAG (-1)
#define MPI_PROC_NULL (-2)
/* The root of an intercommunicator collective; on an intracommunicator it is an invalid root. */
#define MPI_ROOT (-3)
#define MPI_UNDEFINED (-32766)

#define MPI_BOTTOM SEMPI_MPI_NULL(void*)
/* The array_of_errcodes argument of the spawn calls, when the codes are not wanted. */
#define MPI_ERRCODES_IGNORE SEMPI_MPI_NULL(int*)
#define MPI_IN_PLACE SEMPI_MPI_ADDRESS(void*, 1)

#define MPI_MAX_PROCESSOR_NAME 256
#define MPI_MAX_ERROR_STRING 256
#define MPI_MAX_OBJECT_NAME 128
#define MPI_MAX_LIBRARY_VERSION_STRING 256
#define MPI_MAX_INFO_KEY 255
#define MPI_MAX_INFO_VAL 1024

#define MPI_THREAD_SINGLE 0
#define MPI_THREAD_FUNNELED 1
#define MPI_THREAD_SERIALIZED 2
#define MPI_THREAD_MULTIPLE 3

/* Results of MPI_Comm_compare. */
#define MPI_IDENT 0
#define MPI_CONGRUENT 1
#define MPI_SIMILAR 2
#define MPI_UNEQUAL 3

#define MPI_COMM_TYPE_SHARED 1

/* Bytes a buffered message (MPI_Bsend) takes in the attached buffer beyond its packed size. */
#define MPI_BSEND_OVERHEAD 64

/* Topologies (MPI_Topo_test). */
#define MPI_GRAPH 1
#define MPI_CART 2
#define MPI_DIST_GRAPH 3

/* How a datatype was made (MPI_Type_get_envelope, MPI 3.1 section 4.1.13). sempi's
 * constructors give NAMED (predefined), DUP, CONTIGUOUS, VECTOR, HVECTOR, INDEXED, HINDEXED,
 * INDEXED_BLOCK, HINDEXED_BLOCK, STRUCT, SUBARRAY and RESIZED; the others are defined so that
 * programs handling every combiner compile. */
#define MPI_COMBINER_NAMED 1
#define MPI_COMBINER_DUP 2
#define MPI_COMBINER_CONTIGUOUS 3
#define MPI_COMBINER_VECTOR 4
#define MPI_COMBINER_HVECTOR_INTEGER 5
#define MPI_COMBINER_HVECTOR 6
#define MPI_COMBINER_INDEXED 7
#define MPI_COMBINER_HINDEXED_INTEGER 8
#define MPI_COMBINER_HINDEXED 9
#define MPI_COMBINER_INDEXED_BLOCK 10
#define MPI_COMBINER_HINDEXED_BLOCK 11
#define MPI_COMBINER_STRUCT_INTEGER 12
#define MPI_COMBINER_STRUCT 13
#define MPI_COMBINER_SUBARRAY 14
#define MPI_COMBINER_DARRAY 15
#define MPI_COMBINER_F90_REAL 16
#define MPI_COMBINER_F90_COMPLEX 17
#define MPI_COMBINER_F90_INTEGER 18
#define MPI_COMBINER_RESIZED 19

/* Array orders for MPI_Type_create_subarray. */
#define MPI_ORDER_C 56
#define MPI_ORDER_FORTRAN 57

/* Predefined attribute keys for MPI_Comm_get_attr. */
#define MPI_TAG_UB 1
#define MPI_HOST 2
#define MPI_IO 3
#define MPI_WTIME_IS_GLOBAL 4
#define MPI_UNIVERSE_SIZE 5
#define MPI_APPNUM 6
/* Not a key: what MPI_Comm_free_keyval leaves in the variable. */
#define MPI_KEYVAL_INVALID (-1)

/* ---- error classes (error codes equal their class) ---------------------------------------- */
#define MPI_SUCCESS 0
#define MPI_ERR_BUFFER 1
#define MPI_ERR_COUNT 2
#define MPI_ERR_TYPE 3
#define MPI_ERR_TAG 4
#define MPI_ERR_COMM 5
#define MPI_ERR_RANK 6
#define MPI_ERR_REQUEST 7
#define MPI_ERR_ROOT 8
#define MPI_ERR_GROUP 9
#define MPI_ERR_OP 10
#define MPI_ERR_TOPOLOGY 11
#define MPI_ERR_DIMS 12
#define MPI_ERR_ARG 13
#define MPI_ERR_UNKNOWN 14
#define MPI_ERR_TRUNCATE 15
#define MPI_ERR_OTHER 16
#define MPI_ERR_INTERN 17
#define MPI_ERR_IN_STATUS 18
#define MPI_ERR_PENDING 19
#define MPI_ERR_INFO 20
#define MPI_ERR_INFO_KEY 21
#define MPI_ERR_INFO_VALUE 22
#define MPI_ERR_INFO_NOKEY 23
#define MPI_ERR_NO_MEM 24
#define MPI_ERR_KEYVAL 25
#define MPI_ERR_IO 26
/* The remaining MPI 3.1 classes (section 8.4). sempi has no one-sided, file or dynamic-process
 * calls, so it raises none of these itself; programs and libraries may still name them, and
 * MPI_Error_class / MPI_Error_string know them. */
#define MPI_ERR_BASE 27
#define MPI_ERR_SIZE 28
#define MPI_ERR_DISP 29
#define MPI_ERR_WIN 30
#define MPI_ERR_LOCKTYPE 31
#define MPI_ERR_ASSERT 32
#define MPI_ERR_RMA_CONFLICT 33
#define MPI_ERR_RMA_SYNC 34
#define MPI_ERR_RMA_RANGE 35
#define MPI_ERR_RMA_ATTACH 36
#define MPI_ERR_RMA_SHARED 37
#define MPI_ERR_RMA_FLAVOR 38
#define MPI_ERR_SPAWN 39
/* sempi's own classes: the fabric's security and failure conditions. */
#define SEMPI_ERR_POLICY 40    /* the job's policy denies the operation */
#define SEMPI_ERR_SECURITY 41  /* identity, certificate or TLS failure */
#define SEMPI_ERR_TIMEOUT 42   /* a deadline passed */
#define SEMPI_ERR_PEER_FAILED 43 /* the peer rank died or the job was aborted */
#define SEMPI_ERR_CONFIG 44    /* bad configuration */
#define MPI_ERR_PORT 45
#define MPI_ERR_SERVICE 46
#define MPI_ERR_NAME 47
#define MPI_ERR_FILE 48
#define MPI_ERR_NOT_SAME 49
#define MPI_ERR_AMODE 50
#define MPI_ERR_UNSUPPORTED_DATAREP 51
#define MPI_ERR_UNSUPPORTED_OPERATION 52
#define MPI_ERR_NO_SUCH_FILE 53
#define MPI_ERR_FILE_EXISTS 54
#define MPI_ERR_BAD_FILE 55
#define MPI_ERR_ACCESS 56
#define MPI_ERR_NO_SPACE 57
#define MPI_ERR_QUOTA 58
#define MPI_ERR_READ_ONLY 59
#define MPI_ERR_FILE_IN_USE 60
#define MPI_ERR_DUP_DATAREP 61
#define MPI_ERR_CONVERSION 62
#define MPI_ERR_LASTCODE 63

/* ---- callbacks ---------------------------------------------------------------------------- */
typedef void(MPI_User_function)(void *invec, void *inoutvec, int *len, MPI_Datatype *datatype);
typedef int(MPI_Comm_copy_attr_function)(MPI_Comm oldcomm, int comm_keyval, void *extra_state,
                                         void *attribute_val_in, void *attribute_val_out,
                                         int *flag);
typedef int(MPI_Comm_delete_attr_function)(MPI_Comm comm, int comm_keyval, void *attribute_val,
                                           void *extra_state);
/* The predefined attribute callbacks: copy nothing, copy the value itself, delete nothing. */
int sempi_mpi_comm_null_copy_fn(MPI_Comm oldcomm, int comm_keyval, void *extra_state,
                                void *attribute_val_in, void *attribute_val_out, int *flag);
int sempi_mpi_comm_dup_fn(MPI_Comm oldcomm, int comm_keyval, void *extra_state,
                          void *attribute_val_in, void *attribute_val_out, int *flag);
int sempi_mpi_comm_null_delete_fn(MPI_Comm comm, int comm_keyval, void *attribute_val,
                                  void *extra_state);
#define MPI_COMM_NULL_COPY_FN sempi_mpi_comm_null_copy_fn
#define MPI_COMM_DUP_FN sempi_mpi_comm_dup_fn
#define MPI_COMM_NULL_DELETE_FN sempi_mpi_comm_null_delete_fn
/* The MPI-1 names of the same (MPI 3.1 section 15.2, deprecated since MPI-2.0). */
typedef MPI_Comm_copy_attr_function MPI_Copy_function;
typedef MPI_Comm_delete_attr_function MPI_Delete_function;
#define MPI_NULL_COPY_FN sempi_mpi_comm_null_copy_fn
#define MPI_DUP_FN sempi_mpi_comm_dup_fn
#define MPI_NULL_DELETE_FN sempi_mpi_comm_null_delete_fn

/* ---- environment -------------------------------------------------------------------------- */
int MPI_Init(int *argc, char ***argv);
int MPI_Init_thread(int *argc, char ***argv, int required, int *provided);
int MPI_Finalize(void);
int MPI_Initialized(int *flag);
int MPI_Finalized(int *flag);
int MPI_Abort(MPI_Comm comm, int errorcode);
int MPI_Query_thread(int *provided);
int MPI_Is_thread_main(int *flag);
int MPI_Get_version(int *version, int *subversion);
int MPI_Get_library_version(char *version, int *resultlen);
int MPI_Get_processor_name(char *name, int *resultlen);
double MPI_Wtime(void);
double MPI_Wtick(void);
int MPI_Pcontrol(const int level, ...);
int MPI_Error_string(int errorcode, char *string, int *resultlen);
int MPI_Error_class(int errorcode, int *errorclass);
int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler);
int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *errhandler);
int MPI_Errhandler_free(MPI_Errhandler *errhandler);
int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr);
int MPI_Free_mem(void *base);

/* ---- point-to-point ----------------------------------------------------------------------- */
int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Ssend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
              MPI_Comm comm);
int MPI_Bsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
              MPI_Comm comm);
int MPI_Rsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
              MPI_Comm comm);
int MPI_Buffer_attach(void *buffer, int size);
int MPI_Buffer_detach(void *buffer_addr, int *size);
int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
             MPI_Status *status);
int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
              MPI_Request *request);
int MPI_Issend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
               MPI_Comm comm, MPI_Request *request);
int MPI_Ibsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
               MPI_Comm comm, MPI_Request *request);
int MPI_Irsend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
               MPI_Comm comm, MPI_Request *request);
int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Request *request);
int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                 int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype, int source,
                 int recvtag, MPI_Comm comm, MPI_Status *status);
int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                         int source, int recvtag, MPI_Comm comm, MPI_Status *status);
int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status);
int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status);
int MPI_Get_count(const MPI_Status *status, MPI_Datatype datatype, int *count);
int MPI_Get_elements(const MPI_Status *status, MPI_Datatype datatype, int *count);
int MPI_Wait(MPI_Request *request, MPI_Status *status);
int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[]);
int MPI_Waitany(int count, MPI_Request array_of_requests[], int *index, MPI_Status *status);
int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount,
                 int array_of_indices[], MPI_Status array_of_statuses[]);
int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status);
int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag,
                MPI_Status array_of_statuses[]);
int MPI_Testany(int count, MPI_Request array_of_requests[], int *index, int *flag,
                MPI_Status *status);
int MPI_Testsome(int incount, MPI_Request array_of_requests[], int *outcount,
                 int array_of_indices[], MPI_Status array_of_statuses[]);
int MPI_Cancel(MPI_Request *request);
int MPI_Test_cancelled(const MPI_Status *status, int *flag);
int MPI_Request_free(MPI_Request *request);
int MPI_Send_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                  MPI_Comm comm, MPI_Request *request);
int MPI_Ssend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Request *request);
int MPI_Bsend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Request *request);
int MPI_Rsend_init(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Request *request);
int MPI_Recv_init(void *buf, int count, MPI_Datatype datatype, int source, int tag,
                  MPI_Comm comm, MPI_Request *request);
int MPI_Start(MPI_Request *request);
int MPI_Startall(int count, MPI_Request array_of_requests[]);

/* ---- collectives -------------------------------------------------------------------------- */
int MPI_Barrier(MPI_Comm comm);
int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                MPI_Comm comm);
int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                 MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                 int root, MPI_Comm comm);
int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm);
int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                  const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm);
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                  MPI_Op op, MPI_Comm comm);
int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
             MPI_Comm comm);
int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               MPI_Comm comm);
int MPI_Reduce_local(const void *inbuf, void *inoutbuf, int count, MPI_Datatype datatype,
                     MPI_Op op);
int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request);
int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
               MPI_Request *request);
int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                   MPI_Op op, MPI_Comm comm, MPI_Request *request);
int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request *request);
int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                MPI_Request *request);
int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request *request);
int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request);
int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request);
int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                 MPI_Comm comm, MPI_Request *request);
int MPI_Iscatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                  MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                  int root, MPI_Comm comm, MPI_Request *request);
int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm comm, MPI_Request *request);
int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                   MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                   const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request *request);
int MPI_Ialltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[],
                   const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],
                   const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                   MPI_Request *request);
int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                              MPI_Request *request);
int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request);
int MPI_Iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
              MPI_Comm comm, MPI_Request *request);
int MPI_Iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                MPI_Comm comm, MPI_Request *request);
int MPI_Op_create(MPI_User_function *user_fn, int commute, MPI_Op *op);
int MPI_Op_free(MPI_Op *op);
int MPI_Op_commutative(MPI_Op op, int *commute);

/* ---- communicators and groups ------------------------------------------------------------- */
int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Comm_size(MPI_Comm comm, int *size);
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm);
int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info,
                        MPI_Comm *newcomm);
int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm);
int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm);
int MPI_Comm_free(MPI_Comm *comm);
int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int *result);
int MPI_Comm_set_name(MPI_Comm comm, const char *comm_name);
int MPI_Comm_get_name(MPI_Comm comm, char *comm_name, int *resultlen);
int MPI_Comm_test_inter(MPI_Comm comm, int *flag);
int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function *comm_copy_attr_fn,
                           MPI_Comm_delete_attr_function *comm_delete_attr_fn, int *comm_keyval,
                           void *extra_state);
int MPI_Comm_free_keyval(int *comm_keyval);
int MPI_Comm_set_attr(MPI_Comm comm, int comm_keyval, void *attribute_val);
int MPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void *attribute_val, int *flag);
int MPI_Comm_delete_attr(MPI_Comm comm, int comm_keyval);
/* MPI-1 attribute calls (MPI 3.1 section 15.2): the MPI_Comm_* calls above under their old
 * names, for programs written before MPI-2. Deprecated, as in MPI 3.1 and Open MPI; define
 * SEMPI_MPI_NO_DEPRECATION to build legacy code under -Werror without the warnings. */
#if defined(__GNUC__) && !defined(SEMPI_MPI_NO_DEPRECATION)
#define SEMPI_MPI_DEPRECATED(replacement) \
  __attribute__((__deprecated__("deprecated since MPI-2.0; use " replacement " instead")))
#else
#define SEMPI_MPI_DEPRECATED(replacement)
#endif
int MPI_Keyval_create(MPI_Copy_function* copy_fn, MPI_Delete_function* delete_fn, int* keyval,
                      void* extra_state) SEMPI_MPI_DEPRECATED("MPI_Comm_create_keyval");
int MPI_Keyval_free(int* keyval) SEMPI_MPI_DEPRECATED("MPI_Comm_free_keyval");
int MPI_Attr_put(MPI_Comm comm, int keyval, void* attribute_val)
    SEMPI_MPI_DEPRECATED("MPI_Comm_set_attr");
int MPI_Attr_get(MPI_Comm comm, int keyval, void* attribute_val, int* flag)
    SEMPI_MPI_DEPRECATED("MPI_Comm_get_attr");
int MPI_Attr_delete(MPI_Comm comm, int keyval) SEMPI_MPI_DEPRECATED("MPI_Comm_delete_attr");
int MPI_Comm_group(MPI_Comm comm, MPI_Group *group);
int MPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup);
int MPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group *newgroup);
int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup);
int MPI_Group_range_excl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup);
int MPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup);
int MPI_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup);
int MPI_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group *newgroup);
int MPI_Group_size(MPI_Group group, int *size);
int MPI_Group_rank(MPI_Group group, int *rank);
int MPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2,
                              int ranks2[]);
int MPI_Group_compare(MPI_Group group1, MPI_Group group2, int *result);
int MPI_Group_free(MPI_Group *group);

/* ---- Cartesian topologies ----------------------------------------------------------------- */
int MPI_Dims_create(int nnodes, int ndims, int dims[]);
int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[],
                    int reorder, MPI_Comm *comm_cart);
int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]);
int MPI_Cart_rank(MPI_Comm comm, const int coords[], int *rank);
int MPI_Cart_shift(MPI_Comm comm, int direction, int disp, int *rank_source, int *rank_dest);
int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[]);
int MPI_Cartdim_get(MPI_Comm comm, int *ndims);
int MPI_Topo_test(MPI_Comm comm, int *status);

/* ---- datatypes ---------------------------------------------------------------------------- */
int MPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype *newtype);
int MPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype,
                    MPI_Datatype *newtype);
int MPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                            MPI_Datatype *newtype);
int MPI_Type_indexed(int count, const int array_of_blocklengths[],
                     const int array_of_displacements[], MPI_Datatype oldtype,
                     MPI_Datatype *newtype);
int MPI_Type_create_hindexed(int count, const int array_of_blocklengths[],
                             const MPI_Aint array_of_displacements[], MPI_Datatype oldtype,
                             MPI_Datatype *newtype);
int MPI_Type_create_indexed_block(int count, int blocklength, const int array_of_displacements[],
                                  MPI_Datatype oldtype, MPI_Datatype *newtype);
int MPI_Type_create_struct(int count, const int array_of_blocklengths[],
                           const MPI_Aint array_of_displacements[],
                           const MPI_Datatype array_of_types[], MPI_Datatype *newtype);
int MPI_Type_create_subarray(int ndims, const int array_of_sizes[],
                             const int array_of_subsizes[], const int array_of_starts[],
                             int order, MPI_Datatype oldtype, MPI_Datatype *newtype);
int MPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent,
                            MPI_Datatype *newtype);
int MPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype *newtype);
int MPI_Type_commit(MPI_Datatype *datatype);
int MPI_Type_free(MPI_Datatype *datatype);
int MPI_Type_size(MPI_Datatype datatype, int *size);
int MPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint *lb, MPI_Aint *extent);
int MPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint *true_lb, MPI_Aint *true_extent);
int MPI_Type_get_name(MPI_Datatype datatype, char *type_name, int *resultlen);
int MPI_Type_set_name(MPI_Datatype datatype, const char *type_name);
int MPI_Pack(const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf, int outsize,
             int *position, MPI_Comm comm);
int MPI_Unpack(const void *inbuf, int insize, int *position, void *outbuf, int outcount,
               MPI_Datatype datatype, MPI_Comm comm);
int MPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int *size);
int MPI_Get_address(const void *location, MPI_Aint *address);
MPI_Aint MPI_Aint_add(MPI_Aint base, MPI_Aint disp);
MPI_Aint MPI_Aint_diff(MPI_Aint addr1, MPI_Aint addr2);

/* ---- info --------------------------------------------------------------------------------- */
int MPI_Info_create(MPI_Info *info);
int MPI_Info_set(MPI_Info info, const char *key, const char *value);
int MPI_Info_get(MPI_Info info, const char *key, int valuelen, char *value, int *flag);
int MPI_Info_delete(MPI_Info info, const char *key);
int MPI_Info_get_nkeys(MPI_Info info, int *nkeys);
int MPI_Info_free(MPI_Info *info);

/* ---- matched probe (MPI 3.1 section 3.8.2) -------------------------------------------------
 * MPI_Mprobe / MPI_Improbe take the message they find out of matching: no other receive, in
 * any thread, can match it; only MPI_Mrecv / MPI_Imrecv on the returned handle receive it. */
struct sempi_mpi_message;
typedef struct sempi_mpi_message *MPI_Message;
extern struct sempi_mpi_message sempi_mpi_message_no_proc;
#define MPI_MESSAGE_NULL SEMPI_MPI_NULL(MPI_Message)
/* What a probe for source MPI_PROC_NULL returns; receiving it gives an empty status. */
#define MPI_MESSAGE_NO_PROC (&sempi_mpi_message_no_proc)

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status);
int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                MPI_Status *status);
int MPI_Mrecv(void *buf, int count, MPI_Datatype datatype, MPI_Message *message,
              MPI_Status *status);
int MPI_Imrecv(void *buf, int count, MPI_Datatype datatype, MPI_Message *message,
               MPI_Request *request);
/* ---- end of matched probe ----------------------------------------------------------------- */

/* ---- request status and user-defined error handlers (MPI 3.1 sections 3.7.6, 8.3) ---------
 * A user-defined handler's function is called with the communicator the error was raised on
 * and the error code; the failing call then returns the code. Communicators created from one
 * inherit its handler. */
typedef void(MPI_Comm_errhandler_function)(MPI_Comm *comm, int *errorcode, ...);
typedef MPI_Comm_errhandler_function MPI_Comm_errhandler_fn; /* the MPI-2.0 name */

int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status);
int MPI_Comm_create_errhandler(MPI_Comm_errhandler_function *comm_errhandler_fn,
                               MPI_Errhandler *errhandler);
int MPI_Comm_call_errhandler(MPI_Comm comm, int errorcode);
/* ---- end of request status and user-defined error handlers -------------------------------- */

/* ---- Cartesian sub-grids, all-to-all with per-block types, large-count datatype queries ---- */
int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm);
int MPI_Alltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[],
                  const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],
                  const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm);
int MPI_Type_create_hindexed_block(int count, int blocklength,
                                   const MPI_Aint array_of_displacements[], MPI_Datatype oldtype,
                                   MPI_Datatype *newtype);
int MPI_Type_size_x(MPI_Datatype datatype, MPI_Count *size);
int MPI_Type_get_extent_x(MPI_Datatype datatype, MPI_Count *lb, MPI_Count *extent);
int MPI_Type_get_true_extent_x(MPI_Datatype datatype, MPI_Count *true_lb,
                               MPI_Count *true_extent);
int MPI_Get_elements_x(const MPI_Status *status, MPI_Datatype datatype, MPI_Count *count);
/* ---- end of Cartesian sub-grids, all-to-all with per-block types, large-count queries ------ */

/* ---- datatype decoding (MPI 3.1 section 4.1.13) -------------------------------------------
 * MPI_Type_get_contents returns the arguments the type was made with; derived types among
 * them come back as new handles, which the caller frees. It is MPI_ERR_TYPE for a predefined
 * (MPI_COMBINER_NAMED) type and MPI_ERR_ARG if a max_* is smaller than the envelope says. */
int MPI_Type_get_envelope(MPI_Datatype datatype, int *num_integers, int *num_addresses,
                          int *num_datatypes, int *combiner);
int MPI_Type_get_contents(MPI_Datatype datatype, int max_integers, int max_addresses,
                          int max_datatypes, int array_of_integers[],
                          MPI_Aint array_of_addresses[], MPI_Datatype array_of_datatypes[]);
/* ---- end of datatype decoding ------------------------------------------------------------- */

/* ---- C/Fortran handle conversion, info enumeration, status setters ------------------------
 * MPI_*_c2f gives a handle a number (MPI_Fint) on first conversion, 0 for the null handle;
 * MPI_*_f2c of a number no handle was given returns the null handle. */
MPI_Fint MPI_Comm_c2f(MPI_Comm comm);
MPI_Comm MPI_Comm_f2c(MPI_Fint comm);
MPI_Fint MPI_Type_c2f(MPI_Datatype datatype);
MPI_Datatype MPI_Type_f2c(MPI_Fint datatype);
MPI_Fint MPI_Group_c2f(MPI_Group group);
MPI_Group MPI_Group_f2c(MPI_Fint group);
MPI_Fint MPI_Request_c2f(MPI_Request request);
MPI_Request MPI_Request_f2c(MPI_Fint request);
MPI_Fint MPI_Op_c2f(MPI_Op op);
MPI_Op MPI_Op_f2c(MPI_Fint op);
MPI_Fint MPI_Info_c2f(MPI_Info info);
MPI_Info MPI_Info_f2c(MPI_Fint info);
MPI_Fint MPI_Errhandler_c2f(MPI_Errhandler errhandler);
MPI_Errhandler MPI_Errhandler_f2c(MPI_Fint errhandler);

int MPI_Info_dup(MPI_Info info, MPI_Info *newinfo);
int MPI_Info_get_nthkey(MPI_Info info, int n, char *key);
int MPI_Info_get_valuelen(MPI_Info info, const char *key, int *valuelen, int *flag);

int MPI_Status_set_elements(MPI_Status *status, MPI_Datatype datatype, int count);
int MPI_Status_set_elements_x(MPI_Status *status, MPI_Datatype datatype, MPI_Count count);
int MPI_Status_set_cancelled(MPI_Status *status, int flag);
/* ---- end of C/Fortran handle conversion, info enumeration, status setters ----------------- */

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* SEMPI_MPI_H_INCLUDED */
